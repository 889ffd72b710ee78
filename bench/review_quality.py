"""The review's quality on real pull requests with known issues: precision, recall and F1, with and without each filter.

Each case of ``bench/quality_corpus/*.json`` (a real change that a later commit fixed, the files before and after it,
and the issues the fix shows) is built as a pull request on the fake GitHub and reviewed by the whole app in process
(tests/harness.py), with the production settings that matter here: the verification pass on, its cheaper model, the
default threshold and cap. The model side (bench/quality_model.py) answers each request the app makes from a recording
keyed by the request's hash, or from the real API when ANTHROPIC_API_KEY is set (recording what it answers).

A judge then matches every finding the model made (published or held back) against the case's known issues, pairwise:
"the same underlying issue?" (its request is answered the same way: recorded, or the API). From the job's stored
answer (the findings kept, with their verdicts, and those withheld, with why) every variant is computed: no filter, each
filter alone, each left out, all three; what the app published must be the "all" variant. A finding counts when it is
shown (inline or outside the diff: folded ones are not what people read); precision is the share of shown findings
that match a known issue, recall the share of known issues matched by a shown finding; both summed over the cases of
a language (micro averages). Model cost per review comes from the recordings' usage, with and without the verification.

    python bench/review_quality.py                      # replay (or the API with ANTHROPIC_API_KEY); --json
    python bench/review_quality.py --record-missing     # requests without a recording go to quality_recordings/pending
    python bench/review_quality.py --save-answer HASH answer.json   # a stand-in's answer to a pending request
    python bench/review_quality.py --configs "diff only,codebase" --cases ID,ID   # some configurations, some cases

Configurations (``--configs``, default: the first two): each reviews every case with one `.github/reviewer.yml`:
"diff only" (no codebase), "codebase" (the repository at the head: cross-file context in the prompt and for the
verifier), "codebase + tools" (and the model's search tools), "diff only (3 passes)" and "codebase (3 passes)" (each also with
``passes_vote: true``: "... (3 passes voting)"). A case
built with ``build.py --tree`` has its whole repository at the base commit served as the fake GitHub's archive; a case
without a tree gets only its changed files there.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import difflib
import json
import logging
import os
import re
import sys
import tarfile
import tempfile
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from aiohttp import web  # noqa: E402

from bench.quality_model import JUDGE_MODEL, JUDGE_TOOL, REVIEW_MODEL, VERIFY_MODEL, ModelSide  # noqa: E402
from bench.quality_score import compare, render, render_comparison, report  # noqa: E402
from reviewer_app.core.job_records import StoredAnswer  # noqa: E402
from reviewer_app.core.review_model import ModelComment  # noqa: E402

CORPUS = ROOT / "bench" / "quality_corpus"
RECORDINGS = ROOT / "bench" / "quality_recordings"
DIFF_CONTEXT = 3  # lines of context in the patches, as GitHub's

JUDGE_SYSTEM = f"""\
You judge an automated code review against the known issues of a pull request: problems a later commit fixed, each \
described in one sentence with its file and line. For each finding of the review, decide which known issue it is \
about, if any: the same underlying issue, even when the finding words it differently, points at a neighbouring line, \
or proposes another fix. A finding about a different problem in the same code, a vaguer worry that would not lead a \
reader to the known issue, or a style point is not a match. Each finding matches at most one known issue. Answer by \
calling {JUDGE_TOOL} once, with one entry per finding.
"""
JUDGE_TOOL_SCHEMA: dict[str, Any] = {
    "name": JUDGE_TOOL,
    "description": "Submit, for every finding, the known issue it is about or none.",
    "input_schema": {
        "type": "object",
        "properties": {
            "matches": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "finding": {"type": "string", "description": 'The finding\'s id, e.g. "F1".'},
                        "issue": {"type": "string", "description": 'The known issue\'s id, e.g. "K1", or "none".'},
                        "reason": {"type": "string", "description": "One line."},
                    },
                    "required": ["finding", "issue", "reason"],
                },
            }
        },
        "required": ["matches"],
    },
}

# The configurations compared, by name: the repository's .github/reviewer.yml for each.
CONFIGS: dict[str, str] = {
    "diff only": "codebase: false\n",
    "codebase": "codebase: true\n",
    "codebase + tools": "codebase: true\nrepository_tools: true\n",
    "diff only (3 passes)": "codebase: false\npasses: 3\n",
    "codebase (3 passes)": "codebase: true\npasses: 3\n",
    "diff only (3 passes voting)": "codebase: false\npasses: 3\npasses_vote: true\n",
    "codebase (3 passes voting)": "codebase: true\npasses: 3\npasses_vote: true\n",
    "codebase for the verifier": "codebase: true\n",
}
# Server settings a configuration needs besides its .github/reviewer.yml: "codebase for the verifier" puts no related
# code in the review's prompt (the review request is the diff's), and the verifier still reads the repository.
CONFIG_ENV: dict[str, dict[str, str]] = {"codebase for the verifier": {"REVIEWER_CODEBASE_CONTEXT_TOKENS": "0"}}
DEFAULT_CONFIGS = ("diff only", "codebase")
MAX_TREE_FILE_BYTES = 1024 * 1024

# --------------------------------------------------------------------------------------------------- the corpus


def load_cases(corpus: Path, names: Sequence[str] = ()) -> list[dict[str, Any]]:
    cases = [json.loads(p.read_text()) for p in sorted(corpus.glob("*.json"))]
    if names:
        wanted = set(names)
        cases = [c for c in cases if c["id"] in wanted]
        missing = wanted - {c["id"] for c in cases}
        if missing:
            raise SystemExit(f"no such case: {', '.join(sorted(missing))}")
    return cases


def pull_entry(path: str, base: str | None, head: str | None) -> dict[str, Any]:
    """A GitHub-shaped entry of the pull request's file list, its patch computed as GitHub's (3 lines of context)."""
    a, b = _lines(base), _lines(head)
    lines = list(difflib.unified_diff(a, b, lineterm="", n=DIFF_CONTEXT))[2:]
    adds = sum(1 for ln in lines if ln.startswith("+"))
    dels = sum(1 for ln in lines if ln.startswith("-"))
    status = "added" if base is None else "removed" if head is None else "modified"
    return {
        "filename": path,
        "status": status,
        "additions": adds,
        "deletions": dels,
        "changes": adds + dels,
        "patch": "\n".join(lines),
    }


def _lines(text: str | None) -> list[str]:
    """A file's lines as a diff has them: split on "\\n" only, a final newline ending the last line (not a line)."""
    if not text:
        return []
    lines = text.split("\n")
    return lines[:-1] if lines[-1] == "" else lines


def base_tree(corpus: Path, case_id: str) -> dict[str, str]:
    """The case's repository at the base commit (``<id>.tree.tar.gz`` from ``build.py --tree``): its text files by
    path; empty when the case was built without it."""
    path = corpus / f"{case_id}.tree.tar.gz"
    if not path.exists():
        return {}
    files: dict[str, str] = {}
    with tarfile.open(path, "r:gz") as tar:
        for member in tar:
            if not member.isfile() or member.size > MAX_TREE_FILE_BYTES:
                continue
            data = tar.extractfile(member)
            try:
                files[member.name] = data.read().decode("utf-8") if data is not None else ""
            except UnicodeDecodeError:
                continue
    return files


def head_sha(case: dict[str, Any]) -> str:
    sha = str(case["source"]).rstrip("/").rsplit("/", 1)[-1]
    return sha if re.fullmatch(r"[0-9a-f]{40}", sha) else (sha * 40)[:40]


# ---------------------------------------------------------------------------------------------------- reviewing


@dataclass
class CaseRun:
    """One case reviewed: what the app stored and published, what the judge matched, what the model calls cost."""

    case: dict[str, Any]
    state: str
    answer: StoredAnswer | None
    published: int  # findings the app showed (inline and outside the diff)
    candidates: list[tuple[ModelComment, str | None]] = field(default_factory=list)  # (finding, withheld reason)
    config: str = DEFAULT_CONFIGS[0]
    matches: dict[int, int] = field(default_factory=dict)  # candidate index -> known issue index
    usage: dict[str, dict[str, int]] = field(default_factory=dict)  # by kind: review, verify, judge
    answered_by: set[str] = field(default_factory=set)  # who answered the recordings used: api, stand-in
    missing: int = 0  # requests without a recording

    @property
    def complete(self) -> bool:
        return self.missing == 0 and self.state == "succeeded"


@contextlib.asynccontextmanager
async def serving(model: ModelSide) -> AsyncIterator[str]:
    runner = web.AppRunner(model.make_app(), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()


async def review(
    case: dict[str, Any],
    model: ModelSide,
    url: str,
    work: Path,
    *,
    config: str = DEFAULT_CONFIGS[0],
    corpus: Path = CORPUS,
) -> CaseRun:
    """The whole app reviews ``case`` as a pull request under ``config``; its stored answer and what it published."""
    from reviewer_app.core.states import JobState
    from tests.harness import harness

    env = {
        "ANTHROPIC_BASE_URL": url,
        "REVIEWER_MODEL": REVIEW_MODEL,
        "REVIEWER_VERIFY": "1",
        "REVIEWER_VERIFY_MODEL": VERIFY_MODEL,
        "REVIEWER_MALFORMED_RETRIES": "0",
        "REVIEWER_MAX_ATTEMPTS": "1",
        "REVIEWER_MODEL_TIMEOUT_SECONDS": "600",
        "REVIEWER_CODEBASE_DIR": str(work / "codebase"),
        **CONFIG_ENV.get(config, {}),
    }
    async with harness(work, **env) as h:
        repo = case["repo"]
        h.github.add_repo(repo, h.installation_id)
        files = [pull_entry(f["path"], f["base"], f["head"]) for f in case["files"]]
        pull = h.github.add_pull(
            repo, 1, head_sha(case), files=files, title=case["title"], body=case.get("body") or "", user="author"
        )
        h.github.set_file(repo, ".github/reviewer.yml", CONFIGS[config])
        if "codebase: true" in CONFIGS[config]:
            for path, text in base_tree(corpus, case["id"]).items():  # the archive the codebase room fetches
                h.github.set_file(repo, path, text, ref=pull.base_sha)
        for f in case["files"]:
            if f["head"] is not None:
                h.github.set_file(repo, f["path"], f["head"], ref=pull.head_sha)
            if f["base"] is not None:
                h.github.set_file(repo, f["path"], f["base"], ref=pull.base_sha)
        delivered = await h.deliver("pull_request", h.pr_payload(pull))
        job = await h.wait_state(delivered["job_id"], JobState.SUCCEEDED, JobState.FAILED, timeout=600)
        counts = job.details.counts
        published = (counts.inline + counts.moved) if counts is not None else 0
        return CaseRun(case, job.state.value, job.answer, published, config=config)


def candidates_of(answer: StoredAnswer | None) -> list[tuple[ModelComment, str | None]]:
    """Every finding the model made, as the app left it: kept ones (with their verdicts), then withheld ones."""
    if answer is None:
        return []
    return [*((c, None) for c in answer.comments), *((w.comment, w.reason) for w in answer.withheld)]


# ------------------------------------------------------------------------------------------------------ judging


def judge_body(case: dict[str, Any], findings: Sequence[ModelComment]) -> dict[str, Any]:
    issues = "\n".join(
        f'<issue id="K{i + 1}" path="{k["path"]}" line="{k["line"]}">{k["issue"]}</issue>'
        for i, k in enumerate(case["known_issues"])
    )
    shown = "\n".join(
        f'<finding id="F{i + 1}" path="{c.path}" line="{c.line}" side="{c.side}" severity="{c.rank}">\n'
        f"{c.body.strip()}\n" + (f"<quote>\n{c.quote.strip()}\n</quote>\n" if c.quote else "") + "</finding>"
        for i, c in enumerate(findings)
    )
    user = (
        f"Pull request: {case['repo']}: {case['title']}\n\n<known_issues>\n{issues}\n</known_issues>\n\n"
        f"<findings>\n{shown}\n</findings>\n\nMatch every finding to the known issue it is about, or none, then call "
        f"{JUDGE_TOOL} once."
    )
    return {
        "model": JUDGE_MODEL,
        "max_tokens": 4096,
        "system": JUDGE_SYSTEM,
        "tools": [JUDGE_TOOL_SCHEMA],
        "tool_choice": {"type": "tool", "name": JUDGE_TOOL},
        "messages": [{"role": "user", "content": user}],
    }


async def judge(run: CaseRun, model: ModelSide) -> None:
    """The judge's matches of every finding the model made. The findings are put in a fixed order (by place and
    text), so the judge's request is the same whatever the filters kept or held back."""
    order = sorted(range(len(run.candidates)), key=lambda i: _place(run.candidates[i][0]))
    findings = [run.candidates[i][0] for i in order]
    if not findings:
        return
    message = await model.answer(judge_body(run.case, findings))
    data = message["content"][0].get("input") or {}
    for row in data.get("matches") or []:
        f = re.fullmatch(r"F(\d+)", str(row.get("finding", "")).strip())
        k = re.fullmatch(r"K(\d+)", str(row.get("issue", "")).strip())
        if f and k and int(f.group(1)) <= len(findings) and int(k.group(1)) <= len(run.case["known_issues"]):
            run.matches[order[int(f.group(1)) - 1]] = int(k.group(1)) - 1


def _place(c: ModelComment) -> tuple[str, str, int, str]:
    return (c.path, c.side, c.line, c.body)


# ------------------------------------------------------------------------------------------------------ scoring


# -------------------------------------------------------------------------------------------------------- running


async def run(
    cases: Sequence[dict[str, Any]],
    *,
    recordings: Path = RECORDINGS,
    record_missing: bool = False,
    live: Any = None,
    model: ModelSide | None = None,
    configs: Sequence[str] = DEFAULT_CONFIGS[:1],
    corpus: Path = CORPUS,
    judging: bool = True,
) -> list[CaseRun]:
    model = model or ModelSide(recordings, live=live, record_missing=record_missing)
    runs: list[CaseRun] = []
    with tempfile.TemporaryDirectory() as tmp:
        async with serving(model) as url:
            for index, (config, case) in enumerate((c, x) for c in configs for x in cases):
                model.start_case(case["id"], config)
                (Path(tmp) / str(index)).mkdir()
                result = await review(case, model, url, Path(tmp) / str(index), config=config, corpus=corpus)
                result.candidates = candidates_of(result.answer)
                if judging and not model.missing:
                    await judge(result, model)
                result.missing = len(model.missing)
                for recording in model.answered:
                    kind = recording["kind"]
                    into = result.usage.setdefault(kind, {})
                    for key, value in recording["usage"].items():
                        into[key] = into.get(key, 0) + int(value or 0)
                result.answered_by = {r["by"] for r in model.answered}
                runs.append(result)
    return runs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument("--recordings", type=Path, default=RECORDINGS)
    parser.add_argument("--cases", default="", help="comma-separated case ids (default: all)")
    parser.add_argument("--exclude", default="", help="comma-separated case ids to leave out")
    parser.add_argument("--record-missing", action="store_true", help="dump unanswered requests to pending/")
    parser.add_argument("--save-answer", nargs=2, metavar=("HASH", "FILE"), help="record a stand-in's answer")
    parser.add_argument("--save-answers", type=Path, metavar="DIR", help="record every <hash>.json answer in DIR")
    parser.add_argument("--by", default="", help="with --save-answer(s): who the stand-in is, kept in the recording")
    parser.add_argument("--pending", type=Path, help="where --record-missing writes (default: recordings/pending)")
    parser.add_argument(
        "--no-judge",
        action="store_true",
        help="review and verify only: no judge request (it shows the known issues), no scores; for a blind stand-in",
    )
    parser.add_argument("--prune", action="store_true", help="delete recordings a whole-corpus run did not use")
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--configs",
        default=",".join(DEFAULT_CONFIGS),
        help=f"comma-separated configurations to compare (of: {', '.join(CONFIGS)})",
    )
    args = parser.parse_args(argv)
    saver = ModelSide(args.recordings, pending=args.pending, label=args.by)
    if args.save_answer:
        key, file = args.save_answer
        answer = json.loads(Path(file).read_text() if file != "-" else sys.stdin.read())
        print(saver.save_answer(key, answer))
        return 0
    if args.save_answers:
        for file in sorted(args.save_answers.glob("*.json")):
            if (saver.pending_dir / file.name).exists():
                print(saver.save_answer(file.stem, json.loads(file.read_text())))
        return 0
    logging.disable(logging.WARNING)
    cases = load_cases(args.corpus, [c for c in args.cases.split(",") if c])
    excluded = {c for c in args.exclude.split(",") if c}
    cases = [c for c in cases if c["id"] not in excluded]
    live = None
    if os.environ.get("ANTHROPIC_API_KEY"):
        import anthropic

        live = anthropic.AsyncAnthropic()
    configs = [c.strip() for c in args.configs.split(",") if c.strip()]
    unknown = [c for c in configs if c not in CONFIGS]
    if unknown:
        raise SystemExit(f"no such configuration: {', '.join(unknown)} (known: {', '.join(CONFIGS)})")
    model = ModelSide(args.recordings, live=live, record_missing=args.record_missing, pending=args.pending)
    runs = asyncio.run(run(cases, model=model, configs=configs, corpus=args.corpus, judging=not args.no_judge))
    if args.no_judge:  # no scores: what each review still waits for, nothing about the known issues
        for r in runs:
            print(
                f"{r.config:22} {r.case['id']:32} {r.state:10} findings {len(r.candidates):2}  unanswered {r.missing}"
            )
        return 0
    result = report([r for r in runs if r.config == configs[0]])
    result["configuration"] = configs[0]
    result["comparison"] = compare(runs, configs)
    unused = model.unused()
    if args.prune and not args.cases and not excluded:
        for path in unused:
            path.unlink()
    result["unused_recordings"] = len(unused)
    text = f"{render(result)}\n\n{render_comparison(result['comparison'])}"
    print(json.dumps(result, indent=2) if args.json else text)
    return 1 if result["consistency"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
