"""Which findings people read (pure): the verification pass's verdicts applied, the survivors ranked by severity and
confidence and capped, and everything held back counted by why."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from reviewer_app.core.findings import title_of
from reviewer_app.core.learnings import NAMED_SHARE, Learning, covering, covers
from reviewer_app.core.review_model import SEVERITIES, ModelComment

VERDICTS = ("confirmed", "refuted", "uncertain")
# A finding the verifier gives less than this is not published: at 50 a published finding is at least as likely right
# as wrong. On the quality benchmark a higher threshold cost recall without buying precision (docs/configuration.md).
DEFAULT_MIN_CONFIDENCE = 50
DEFAULT_MAX_COMMENTS = 5  # critical and warning findings shown per review; the rest are listed folded
MAX_REASON_CHARS = 300

# Why a finding is held back, in the order the check run lists them.
INVENTED = "invented quote"
REFUTED = "refuted"
LOW_CONFIDENCE = "low confidence"
PAST_CAP = "past the cap"
TEAM_LEARNING = "team learning"  # a do-not-flag learning of the repository covers it (core/learnings.py)
OUTVOTED = "outvoted"  # found by too few of a review's passes (core/passes.outvoted)
REASONS = (INVENTED, TEAM_LEARNING, REFUTED, LOW_CONFIDENCE, OUTVOTED, PAST_CAP)
# Folded in the review body rather than withheld: past the cap, and suggestion-level findings (and nits).
FOLDED_SEVERITIES = frozenset({"suggestion", "nit"})


@dataclass(frozen=True)
class Verdict:
    """The verifier's word on one finding."""

    verdict: str  # confirmed, refuted or uncertain
    confidence: int  # 0-100: how sure it is the finding is a real problem
    reason: str
    learning: int | None = None  # the do-not-flag learning the verifier says covers the finding
    need: str | None = None  # uncertain for lack of code: the symbol or path it asked to see (review/verify.py)


@dataclass(frozen=True)
class Withheld:
    """A finding not published, and why (one of REASONS)."""

    comment: ModelComment
    reason: str
    learning: int | None = None  # TEAM_LEARNING: the learning that withheld it


def apply_verdicts(
    comments: Sequence[ModelComment],
    verdicts: Mapping[int, Verdict],
    *,
    min_confidence: int,
    learnings: Sequence[Learning] = (),
) -> tuple[list[ModelComment], list[Withheld]]:
    """Each comment (by its index in ``comments``) with its verdict: refuted ones and those under ``min_confidence``
    withheld, the rest kept with the verdict on them. A comment the verifier said nothing about is kept unverified:
    silence is not a refutation. A verdict naming a learning withholds the comment only when that learning (one of
    ``learnings``) covers it by the rule (core/learnings.covers at NAMED_SHARE: its glob, its subject, never a
    critical finding); otherwise the name is ignored and the verdict judged as any other."""
    by_id = {x.id: x for x in learnings}
    kept: list[ModelComment] = []
    withheld: list[Withheld] = []
    for index, comment in enumerate(comments):
        verdict = verdicts.get(index)
        if verdict is None:
            kept.append(comment)
            continue
        judged = replace(
            comment,
            verdict=verdict.verdict,
            confidence=verdict.confidence,
            verdict_reason=verdict.reason[:MAX_REASON_CHARS],
        )
        named = by_id.get(verdict.learning) if verdict.learning is not None else None
        if named is not None and covers(
            named, comment.path, title_of(comment.body), severity=comment.rank, share=NAMED_SHARE
        ):
            withheld.append(Withheld(judged, TEAM_LEARNING, named.id))
        elif verdict.verdict == "refuted":
            withheld.append(Withheld(judged, REFUTED))
        elif verdict.confidence < min_confidence:
            withheld.append(Withheld(judged, LOW_CONFIDENCE))
        else:
            kept.append(judged)
    return kept, withheld


def withhold_covered(
    comments: Sequence[ModelComment], learnings: Sequence[Learning]
) -> tuple[list[ModelComment], list[Withheld]]:
    """The pure rule: each comment a do-not-flag learning covers (core/learnings.covers: its file under the learning's
    glob, its title, the first line of its text, about the learning's subject; never a critical one) withheld, linked
    to that learning; the rest kept, in order."""
    kept: list[ModelComment] = []
    withheld: list[Withheld] = []
    for comment in comments:
        found = covering(learnings, comment.path, title_of(comment.body), severity=comment.rank) if learnings else None
        if found is None:
            kept.append(comment)
        else:
            withheld.append(Withheld(comment, TEAM_LEARNING, found.id))
    return kept, withheld


def ranked(comments: Sequence[ModelComment]) -> list[ModelComment]:
    """Most severe first; within a severity the most confident first (an unverified finding after the verified ones),
    then in the model's order."""
    order = sorted(
        range(len(comments)),
        key=lambda i: (
            SEVERITIES.index(comments[i].rank),
            -(comments[i].confidence if comments[i].confidence is not None else -1),
            i,
        ),
    )
    return [comments[i] for i in order]


@dataclass(frozen=True)
class Shown:
    """The findings of a review as people meet them."""

    shown: tuple[ModelComment, ...]  # as comments (inline, or in the body when outside the diff), ranked
    folded: tuple[ModelComment, ...]  # listed folded in the body: suggestion-level findings and those past the cap
    past_cap: tuple[ModelComment, ...]  # of ``folded``, the critical and warning findings the cap left out


def rank_and_cap(comments: Sequence[ModelComment], *, max_comments: int) -> Shown:
    """Critical and warning findings ranked, the first ``max_comments`` shown; the rest and every suggestion-level
    finding folded (ranked too)."""
    order = ranked(comments)
    serious = [c for c in order if c.rank not in FOLDED_SEVERITIES]
    shown, past = serious[:max_comments], serious[max_comments:]
    rest = [c for c in order if c.rank in FOLDED_SEVERITIES]
    return Shown(tuple(shown), tuple(past + rest), tuple(past))


def withheld_counts(withheld: Sequence[Withheld], past_cap: int = 0) -> list[tuple[str, int]]:
    """(reason, how many) in REASONS order, the reasons with none left out."""
    counts = Counter(w.reason for w in withheld)
    counts[PAST_CAP] += past_cap
    return [(reason, counts[reason]) for reason in REASONS if counts[reason]]
