"""The typed records a job row carries as JSON, its details and the model's stored answer, each with its one
JSON form (pure).

Rows outlive versions: a row written by an older version loads (a key it lacks takes its default, a value of the
wrong type is read as absent), and keys this version does not know (a newer version's) are kept in ``extra`` and
written back as they were, so a worker of this version saving progress does not drop them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, field, fields, replace
from typing import Any, TypeVar

import orjson

from reviewer_app.core.precision import REASONS, VERDICTS, Verdict, Withheld
from reviewer_app.core.review_model import ModelComment, ReviewCounts

R = TypeVar("R")


def assemble(cls: type[R], values: Mapping[str, Any]) -> R:
    """An instance of the frozen dataclass ``cls`` holding ``values`` (every field, each already of its type), made
    without running ``__init__``: a frozen ``__init__`` sets each field through ``object.__setattr__``, and every
    claim reads two such records per job (the Job and its JobDetails). Only for values read back and checked."""
    obj = object.__new__(cls)
    obj.__dict__.update(values)
    return obj


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _object(text: str | bytes | None) -> dict[str, Any]:
    value = orjson.loads(text) if text else {}
    return value if isinstance(value, dict) else {}


def _comment(value: Any) -> ModelComment | None:
    """A stored comment, or None when it lacks what a comment needs."""
    if not isinstance(value, dict):
        return None
    path, line, body = _str(value.get("path")), _int(value.get("line")), _str(value.get("body"))
    if path is None or line is None or body is None:
        return None
    return ModelComment(
        path=path,
        line=line,
        body=body,
        side="LEFT" if value.get("side") == "LEFT" else "RIGHT",
        severity=_str(value.get("severity")),
        suggestion=_str(value.get("suggestion")),
        start_line=_int(value.get("start_line")),
        quote=_str(value.get("quote")),
        failure=_str(value.get("failure")),
        verdict=value["verdict"] if value.get("verdict") in VERDICTS else None,
        confidence=_int(value.get("confidence")),
        verdict_reason=_str(value.get("verdict_reason")),
        votes=_int(value.get("votes")),
    )


def _comments(value: Any) -> tuple[ModelComment, ...]:
    found = (_comment(c) for c in value) if isinstance(value, list) else ()
    return tuple(c for c in found if c is not None)


def _comment_json(comment: ModelComment) -> dict[str, Any]:
    """A comment's JSON; the evidence and verdict fields only when set (an older answer has none)."""
    return {f.name: v for f in fields(ModelComment) if (v := getattr(comment, f.name)) is not None or f.name in _ALWAYS}


_ALWAYS = frozenset({"path", "line", "body", "side", "severity", "suggestion", "start_line"})


def _withheld(value: Any) -> tuple[Withheld, ...]:
    """Stored withheld findings; an entry without a known reason or a usable comment is left out."""
    out: list[Withheld] = []
    for entry in value if isinstance(value, list) else ():
        if isinstance(entry, dict) and entry.get("reason") in REASONS:
            comment = _comment(entry.get("comment"))
            if comment is not None:
                learning = entry.get("learning")
                out.append(Withheld(comment, entry["reason"], learning if type(learning) is int else None))
    return tuple(out)


@dataclass(frozen=True)
class VerifyAnswer:
    """The verification pass's answer, checkpointed until the review's answer is stored: verdicts by the index of the
    finding in the request, and the model that gave them."""

    verdicts: Mapping[int, Verdict]
    model: str = ""

    @classmethod
    def from_dict(cls, value: Any) -> VerifyAnswer | None:
        if not isinstance(value, dict) or not isinstance(value.get("verdicts"), list):
            return None
        verdicts: dict[int, Verdict] = {}
        for row in value["verdicts"]:
            if (  # [index, verdict, confidence, reason] and, when it asked for code, what it needs
                isinstance(row, list)
                and len(row) in (4, 5)
                and _int(row[0]) is not None
                and row[1] in VERDICTS
                and _int(row[2]) is not None
                and isinstance(row[3], str)
            ):
                verdicts[row[0]] = Verdict(row[1], row[2], row[3], need=_str(row[4]) if len(row) == 5 else None)
        return cls(verdicts, _str(value.get("model")) or "")

    def to_dict(self) -> dict[str, Any]:
        rows = [
            [i, v.verdict, v.confidence, v.reason, *([v.need] if v.need else [])]
            for i, v in sorted(self.verdicts.items())
        ]
        return {"verdicts": rows, "model": self.model}


def _counts(value: Any) -> ReviewCounts | None:
    if not isinstance(value, dict):
        return None
    return ReviewCounts(**{f.name: _int(value.get(f.name)) or 0 for f in fields(ReviewCounts)})


@dataclass(frozen=True)
class CheckReport:
    """What the check run repeats of a published review (stored with the job when it published)."""

    summary: str = ""
    top: tuple[str, ...] = ()  # the top findings, each one rendered line
    review_url: str = ""
    not_reviewed: str = ""  # "Not reviewed: 3 files (...)", empty when nothing was left out
    conclusion: str = ""
    resolved: int = 0  # the app's own earlier threads it resolved on this pull request (review/memory.py)
    answers: int = 0  # answers the app posted in this pull request's threads so far (review/answer.py)
    # Findings held back (withheld before publication, or folded past the cap): how many, and the folded section's
    # lines (why, by reason, then the findings withheld), rendered when the review was published.
    withheld_count: int = 0
    withheld: tuple[str, ...] = ()
    passes: str = ""  # a review in several passes: what each cost and how many findings merged (core/passes.py)

    @classmethod
    def from_dict(cls, value: Any) -> CheckReport | None:
        if not isinstance(value, dict):
            return None
        top = value.get("top")
        return cls(
            summary=_str(value.get("summary")) or "",
            top=tuple(str(t) for t in top) if isinstance(top, list) else (),
            review_url=_str(value.get("review_url")) or "",
            not_reviewed=_str(value.get("not_reviewed")) or "",
            conclusion=_str(value.get("conclusion")) or "",
            resolved=value["resolved"] if type(value.get("resolved")) is int else 0,
            answers=value["answers"] if type(value.get("answers")) is int else 0,
            withheld_count=value["withheld_count"] if type(value.get("withheld_count")) is int else 0,
            withheld=tuple(str(t) for t in withheld) if isinstance(withheld := value.get("withheld"), list) else (),
            passes=_str(value.get("passes")) or "",
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "summary": self.summary,
            "top": list(self.top),
            "review_url": self.review_url,
            "not_reviewed": self.not_reviewed,
            "conclusion": self.conclusion,
        }
        if self.resolved:
            out["resolved"] = self.resolved
        if self.answers:
            out["answers"] = self.answers
        if self.withheld:
            out["withheld_count"] = self.withheld_count
            out["withheld"] = list(self.withheld)
        if self.passes:
            out["passes"] = self.passes
        return out


@dataclass(frozen=True)
class WouldPublish:
    """What a dry run would have posted (review/dry_run.py), kept on the job for `jobs show` and the dashboard: a
    review's body and its inline comments as GitHub would have got them, or an answer's text."""

    body: str
    comments: tuple[Mapping[str, Any], ...] = ()  # path, line, side, body (start_line, start_side for a range)
    kind: str = "review"  # "review", or "answer" (in a thread, or the conversation)
    why: str = ""  # what made it a dry run: the server's setting or the repository's

    @classmethod
    def from_dict(cls, value: Any) -> WouldPublish | None:
        if not isinstance(value, dict) or not isinstance(value.get("body"), str):
            return None
        comments = value.get("comments")
        return cls(
            body=value["body"],
            comments=tuple(
                dict(c)
                for c in (comments if isinstance(comments, list) else ())
                if isinstance(c, dict) and isinstance(c.get("path"), str) and isinstance(c.get("body"), str)
            ),
            kind=_str(value.get("kind")) or "review",
            why=_str(value.get("why")) or "",
        )

    def to_dict(self) -> dict[str, Any]:
        return {"body": self.body, "comments": [dict(c) for c in self.comments], "kind": self.kind, "why": self.why}


@dataclass(frozen=True)
class PartAnswer:
    """The model's answer to one part of a large review, kept until the whole answer is stored."""

    summary: str
    comments: tuple[ModelComment, ...] = ()
    model: str = ""
    # What asking it cost (every input token, cached or not, and the output), for a review in passes (core/passes.py).
    input_tokens: int = 0
    output_tokens: int = 0

    @classmethod
    def from_dict(cls, value: Any) -> PartAnswer | None:
        if not isinstance(value, dict) or not isinstance(value.get("summary"), str):
            return None
        return cls(
            value["summary"],
            _comments(value.get("comments")),
            _str(value.get("model")) or "",
            _int(value.get("input_tokens")) or 0,
            _int(value.get("output_tokens")) or 0,
        )

    def to_dict(self) -> dict[str, Any]:
        out = {"summary": self.summary, "comments": [_comment_json(c) for c in self.comments], "model": self.model}
        if self.input_tokens or self.output_tokens:
            out |= {"input_tokens": self.input_tokens, "output_tokens": self.output_tokens}
        return out


@dataclass(frozen=True)
class ModelProgress:
    """A model answer not yet stored: the finished parts, and each unfinished part's tool turns (as the Messages
    API has them), keyed by the part's content."""

    parts: Mapping[str, PartAnswer] = field(default_factory=dict)
    turns: Mapping[str, tuple[dict[str, Any], ...]] = field(default_factory=dict)
    verified: Mapping[str, VerifyAnswer] = field(default_factory=dict)  # the verification pass's answer, by request

    @classmethod
    def from_dict(cls, value: Any) -> ModelProgress | None:
        if not isinstance(value, dict):
            return None
        parts = value.get("parts") if isinstance(value.get("parts"), dict) else {}
        turns = value.get("turns") if isinstance(value.get("turns"), dict) else {}
        verified = value.get("verified") if isinstance(value.get("verified"), dict) else {}
        read = {k: PartAnswer.from_dict(v) for k, v in parts.items()}
        checked = {k: VerifyAnswer.from_dict(v) for k, v in verified.items()}
        return cls(
            parts={k: v for k, v in read.items() if v is not None},
            turns={k: tuple(t for t in v if isinstance(t, dict)) for k, v in turns.items() if isinstance(v, list)},
            verified={k: v for k, v in checked.items() if v is not None},
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "parts": {k: v.to_dict() for k, v in self.parts.items()},
            "turns": {k: list(v) for k, v in self.turns.items()},
        }
        if self.verified:
            out["verified"] = {k: v.to_dict() for k, v in self.verified.items()}
        return out

    def with_turn(self, key: str, turn: dict[str, Any]) -> ModelProgress:
        return replace(self, turns={**self.turns, key: (*self.turns.get(key, ()), turn)})

    def with_part(self, key: str, part: PartAnswer) -> ModelProgress:
        """``part`` finished: kept, and its turns dropped."""
        return ModelProgress(
            {**self.parts, key: part}, {k: v for k, v in self.turns.items() if k != key}, self.verified
        )

    def with_verified(self, key: str, answer: VerifyAnswer) -> ModelProgress:
        return replace(self, verified={**self.verified, key: answer})


# JobDetails' fields by their JSON type; the rest are records of their own.
_TEXT = (
    "action",
    "base_ref",
    "base_sha",
    "title",
    "author",
    "requested_by",
    "delivery_id",
    "thread",
    "asked_by",
    "answer_url",
)
_INTS = ("comment_id", "rerun_of", "in_reply_to", "answer_comment_id")
_FLAGS = ("full", "verify_permission")
_COUNTED = frozenset(f.name for f in fields(ReviewCounts)) - {"folded"}  # written even when 0 (folded: when set)


@dataclass(frozen=True)
class JobDetails:
    """What a job knows besides its columns: what asked for it (set at admission) and what its worker found."""

    # Set at admission.
    action: str | None = None  # the webhook action, or "sweep" / "handover" for a head the app read itself
    base_ref: str | None = None
    base_sha: str | None = None
    title: str | None = None
    author: str | None = None  # an outside author, counted against the per-author daily limit
    full: bool = False  # review the whole pull request, not only what changed since the last review
    requested_by: str | None = None  # who asked (`/review`, Re-run), for the per-requester limit
    comment_id: int | None = None  # the `/review` comment, reacted to once the requester's access is confirmed
    verify_permission: bool = False  # ask GitHub for the requester's access before reviewing
    rerun_of: int | None = None  # the check run whose Re-run asked for it
    delivery_id: str | None = None  # the webhook delivery that asked for it (every log line of the job names it)
    # An answer job (core/replies.py): the thread it answers in, its first comment, and who asked.
    thread: str | None = None  # counted against the per-thread limit
    in_reply_to: int | None = None  # the review thread's first comment; None for a question in the conversation
    asked_by: str | None = None
    # Set by the worker.
    model_progress: ModelProgress | None = None  # a model answer not yet stored
    counts: ReviewCounts | None = None  # of the published review
    report: CheckReport | None = None
    incremental: bool | None = None  # whether the published review covered only changes since the last one
    config_errors: tuple[str, ...] = ()  # problems found in .github/reviewer.yml (defaults applied)
    answer_comment_id: int | None = None  # the answer an answer job posted
    answer_url: str | None = None
    would_publish: WouldPublish | None = None  # a dry run's review or answer, posted nowhere (review/dry_run.py)
    extra: Mapping[str, Any] = field(default_factory=dict)  # keys this version does not know, kept as they were

    @classmethod
    def from_dict(cls, value: Mapping[str, Any]) -> JobDetails:
        """Only the keys present are read (a job's details hold a few of them; every claim reads them): a value of
        the wrong type reads as absent, a key this version does not know is kept in ``extra``."""
        kwargs: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        for key, v in value.items():
            read = _READERS.get(key)
            if read is None:
                extra[key] = v
            elif (parsed := read(v)) is not None:
                kwargs[key] = parsed
        return assemble(cls, {**_DETAILS_DEFAULTS, **kwargs, "extra": extra})

    @classmethod
    def from_json(cls, text: str | bytes | None) -> JobDetails:
        return cls.from_dict(_object(text))

    def to_dict(self) -> dict[str, Any]:
        """The JSON object stored: the keys that are set, after the ones this version does not know."""
        fields_ = self.__dict__  # read once: admission writes the details of every job it queues
        out: dict[str, Any] = dict(self.extra)
        out.update({name: v for name in _TEXT if (v := fields_[name]) is not None})
        out.update({name: True for name in _FLAGS if fields_[name]})
        out.update({name: v for name in _INTS if (v := fields_[name]) is not None})
        if self.model_progress is not None:
            out["model_progress"] = self.model_progress.to_dict()
        if self.counts is not None:
            counts = self.counts
            out["counts"] = {
                f.name: v for f in fields(ReviewCounts) if (v := getattr(counts, f.name)) or f.name in _COUNTED
            }
        if self.report is not None:
            out["report"] = self.report.to_dict()
        if self.incremental is not None:
            out["incremental"] = self.incremental
        if self.config_errors:
            out["config_errors"] = list(self.config_errors)
        if self.would_publish is not None:
            out["would_publish"] = self.would_publish.to_dict()
        return out

    def to_json(self) -> str:
        return orjson.dumps(self.to_dict()).decode()


def _config_errors(value: Any) -> tuple[str, ...] | None:
    return tuple(str(e) for e in value) if isinstance(value, list) else None


# How each key of JobDetails' JSON is read; None: absent (the field keeps its default).
_READERS: dict[str, Callable[[Any], Any]] = {
    **{name: _str for name in _TEXT},
    **{name: (lambda v: True if v is True else None) for name in _FLAGS},
    **{name: _int for name in _INTS},
    "model_progress": lambda v: ModelProgress.from_dict(v),
    "counts": _counts,
    "report": lambda v: CheckReport.from_dict(v),
    "incremental": lambda v: v if isinstance(v, bool) else None,
    "config_errors": _config_errors,
    "would_publish": lambda v: WouldPublish.from_dict(v),
}


_DETAILS_DEFAULTS = {f.name: f.default for f in fields(JobDetails) if f.default is not MISSING}


@dataclass(frozen=True)
class StoredAnswer:
    """The model's whole answer, stored on the job before anything is published: a retry publishes it without a
    second model call."""

    summary: str
    comments: tuple[ModelComment, ...] = ()
    not_covered: tuple[tuple[str, str], ...] = ()  # (path, reason) of each file not reviewed
    files_reviewed: int = 0
    model: str = ""
    parts: int = 0
    incremental_note: str | None = None
    # Findings held back before publication (an invented quote, refuted, low confidence), for the check run; an
    # answer stored before the checks existed has none.
    withheld: tuple[Withheld, ...] = ()
    verified_by: str = ""  # the model of the verification pass; empty when the findings were not verified
    # The repository's learnings the review used (in its prompt, or withholding a finding), by id.
    learnings: tuple[int, ...] = ()
    # An answer in a thread: whether the reply disputes the app's finding, and the learning the model proposed then.
    disputes: bool = False
    learning: str | None = None
    # A review in several passes (core/passes.py): each pass's input and output tokens and findings (before merging).
    passes: tuple[tuple[int, int, int], ...] = ()
    extra: Mapping[str, Any] = field(default_factory=dict)  # keys this version does not know, kept as they were

    @classmethod
    def from_json(cls, text: str | bytes | None) -> StoredAnswer | None:
        value = _object(text)
        if not isinstance(value.get("summary"), str):
            return None  # nothing usable: the model is asked again
        known = {f.name for f in fields(cls)} - {"extra"}
        pairs = value.get("not_covered")
        return cls(
            summary=value["summary"],
            comments=_comments(value.get("comments")),
            not_covered=tuple(
                (str(p[0]), str(p[1])) for p in (pairs if isinstance(pairs, list) else ()) if _is_pair(p)
            ),
            files_reviewed=_int(value.get("files_reviewed")) or 0,
            model=_str(value.get("model")) or "",
            parts=_int(value.get("parts")) or 0,
            incremental_note=_str(value.get("incremental_note")),
            withheld=_withheld(value.get("withheld")),
            verified_by=_str(value.get("verified_by")) or "",
            learnings=tuple(i for i in value.get("learnings") or () if type(i) is int)
            if isinstance(value.get("learnings"), list)
            else (),
            disputes=value.get("disputes") is True,
            learning=_str(value.get("learning")),
            passes=_passes(value.get("passes")),
            extra={k: v for k, v in value.items() if k not in known},
        )

    def to_json(self) -> str:
        return orjson.dumps(
            {
                **self.extra,
                "summary": self.summary,
                "comments": [_comment_json(c) for c in self.comments],
                "not_covered": [list(p) for p in self.not_covered],
                "files_reviewed": self.files_reviewed,
                "model": self.model,
                "parts": self.parts,
                "incremental_note": self.incremental_note,
                **({"verified_by": self.verified_by} if self.verified_by else {}),
                **({"disputes": True, "learning": self.learning} if self.disputes else {}),
                **({"learnings": list(self.learnings)} if self.learnings else {}),
                **({"withheld": [_withheld_json(w) for w in self.withheld]} if self.withheld else {}),
                **({"passes": [list(p) for p in self.passes]} if self.passes else {}),
            }
        ).decode()


def _withheld_json(w: Withheld) -> dict[str, Any]:
    out: dict[str, Any] = {"reason": w.reason, "comment": _comment_json(w.comment)}
    if w.learning is not None:
        out["learning"] = w.learning
    return out


def _passes(value: Any) -> tuple[tuple[int, int, int], ...]:
    rows = [p for p in value if isinstance(p, list) and len(p) == 3] if isinstance(value, list) else []
    return tuple((p[0], p[1], p[2]) for p in rows if all(_int(x) is not None for x in p))


def _is_pair(value: Any) -> bool:
    return isinstance(value, list | tuple) and len(value) == 2
