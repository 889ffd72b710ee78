"""What a review costs in input tokens, and where they go: the real pipeline against the fakes, before and after.

The corpus is rebuilt from this project's own git history (each commit as a pull request: GitHub-shaped file
entries, patches, and the files at both commits), plus one generated case (a 3,000-line generated table, pip-compile
output, a CRLF-only conversion and a file GitHub sends without a patch, next to a real change and its test).

Each pull request is reviewed by the whole app in-process (tests/harness.py: fake GitHub and fake Anthropic on
loopback, the real SDK and clients) three times: with the code of ``--before`` (extracted with `git archive` and run
in a subprocess), and with this tree without and with the code around each change (REVIEWER_CONTEXT_LINES=0 and the
default). Tokens are the fake's (JSON characters / 4, summed over input, cache writes and cache reads of every model
call a review made), so before and after are measured with one ruler; the real tokenizer differs by a constant
factor. Also measured: the share of hunks whose enclosing scope was found (tree-sitter or indentation), the share
of the prompt spent on generated, lock and whitespace-only files, and the tokens a retried review reads from the
cache after its first attempt's answer was lost.

    python bench/review_cost.py                  # table; --json for JSON; --commits N; --before REF
    python bench/review_cost.py --cost           # what a review costs in dollars: this tree only, priced, with the
                                                 # verification of 3 findings per review
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import re
import statistics
import subprocess
import sys
import tarfile
import tempfile
from io import BytesIO
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BEFORE_REF = "b77fdb5"  # the last commit before issue 16 (what the model sees)
NO_PATCH_LINES = 3000  # GitHub leaves the patch out of larger file diffs; the corpus does the same
JUNK_KINDS = ("generated", "lock", "whitespace")
FINDINGS = 3  # --cost: the findings each review answers with, which the verification pass is then asked about


# --------------------------------------------------------------------------------------------------- the corpus


def git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, check=True).stdout.decode(
        "utf-8", errors="replace"
    )


def show(ref: str, path: str) -> str | None:
    out = subprocess.run(["git", "-C", str(ROOT), "show", f"{ref}:{path}"], capture_output=True)
    if out.returncode != 0 or b"\x00" in out.stdout[:8000]:
        return None
    return out.stdout.decode("utf-8", errors="replace")


def commit_case(sha: str) -> dict[str, Any] | None:
    """One commit as a pull request: GitHub-shaped file entries plus the files' text at both commits."""
    diff = git("diff", "-M", "--no-color", "--full-index", f"{sha}^", sha)
    files: list[dict[str, Any]] = []
    for chunk in re.split(r"^diff --git ", diff, flags=re.M)[1:]:
        header = chunk.split("\n@@ ", 1)[0]
        old = re.search(r"^--- (?:a/(.*)|/dev/null)$", header, flags=re.M)
        new = re.search(r"^\+\+\+ (?:b/(.*)|/dev/null)$", header, flags=re.M)
        rename = re.search(r"^rename from (.*)$", header, flags=re.M)
        rename_to = re.search(r"^rename to (.*)$", header, flags=re.M)
        path = (new and new[1]) or (rename_to and rename_to[1]) or (old and old[1])
        if not path:
            continue
        previous = rename[1] if rename else (old[1] if old and old[1] else None)
        status = (
            "removed"
            if new and new[1] is None
            else "added"
            if old and old[1] is None
            else "renamed"
            if rename
            else "modified"
        )
        patch = ("@@ " + chunk.split("\n@@ ", 1)[1]).removesuffix("\n") if "\n@@ " in chunk else None
        lines = patch.split("\n") if patch else []
        adds = sum(1 for ln in lines if ln.startswith("+"))
        dels = sum(1 for ln in lines if ln.startswith("-"))
        entry: dict[str, Any] = {
            "filename": path,
            "status": status,
            "additions": adds,
            "deletions": dels,
            "changes": adds + dels,
        }
        if patch is not None and adds + dels <= NO_PATCH_LINES:
            entry["patch"] = patch
        if status == "renamed":
            entry["previous_filename"] = previous
        files.append(
            {
                "entry": entry,
                "head": None if status == "removed" else show(sha, path),
                "base": None if status == "added" else show(f"{sha}^", previous or path),
                "kind": None,
            }
        )
    if not files:
        return None
    subject = git("log", "-1", "--format=%s", sha).strip()
    return {"name": sha[:7], "title": subject[:120], "body": "", "files": files}


def generated_case() -> dict[str, Any]:
    """The awkward files of a real pull request, next to a real change and its test."""
    table = ["# This file is generated by tools/gen_unicode.py. Do not edit it by hand.", "TABLE = ["]
    table += [f"    (0x{i:05X}, 0x{i + 15:05X}, 'Block{i % 97}')," for i in range(0, 3000 * 16, 16)] + ["]"]
    pins = ["#", "# This file is autogenerated by pip-compile with Python 3.11", "#"]
    pins += [f"package-{i}=={i}.{i % 7}.0\n    # via -r requirements.in" for i in range(40)]
    crlf_old = "\r\n".join(f"int value_{i} = {i};" for i in range(300)) + "\r\n"
    crlf_new = crlf_old.replace("\r\n", "\n")
    source = (ROOT / "reviewer_app" / "core" / "retry.py").read_text()
    changed = source.replace("attempt", "attempt_number", 3)
    test = (ROOT / "tests" / "dispatch" / "test_duty.py").read_text()
    test_new = test + "\n\ndef test_retry_names() -> None:\n    assert True\n"
    big_old = "\n".join(f"ROW_{i} = compute({i})" for i in range(4000)) + "\n"
    big_new = big_old.replace("ROW_2000 = compute(2000)", "ROW_2000 = compute(2000) + 1")

    def entry(path: str, old: str | None, new: str | None, kind: str | None, *, patch: bool = True) -> dict[str, Any]:
        a = old.split("\n") if old else []
        b = new.split("\n") if new else []
        import difflib

        lines = list(difflib.unified_diff(a, b, lineterm=""))[2:]
        adds = sum(1 for ln in lines if ln.startswith("+"))
        dels = sum(1 for ln in lines if ln.startswith("-"))
        e: dict[str, Any] = {
            "filename": path,
            "status": "added" if old is None else "modified",
            "additions": adds,
            "deletions": dels,
            "changes": adds + dels,
        }
        if patch:
            e["patch"] = "\n".join(lines)
        return {"entry": e, "head": new, "base": old, "kind": kind}

    return {
        "name": "generated",
        "title": "Retry naming, regenerated tables, pinned requirements, CRLF to LF",
        "body": "Renames the retry attempt counter; regenerates the Unicode table.",
        "files": [
            entry("reviewer_app/core/retry.py", source, changed, None),
            entry("tests/dispatch/test_duty.py", test, test_new, None),
            entry("src/unicode_table.py", None, "\n".join(table) + "\n", "generated"),
            entry("requirements.txt", None, "\n".join(pins) + "\n", "lock"),
            entry("native/values.c", crlf_old, crlf_new, "whitespace"),
            entry("data/rows.py", big_old, big_new, None, patch=False),
        ],
    }


def build_corpus(commits: int, before: str) -> list[dict[str, Any]]:
    shas = git("log", "--no-merges", "--format=%H", f"-n{commits}", before).split()
    cases = [
        c
        for c in (commit_case(sha) for sha in shas if len(git("rev-list", "--parents", "-n1", sha).split()) == 2)
        if c is not None
    ]
    return [*cases, generated_case()]


# ---------------------------------------------------------------------------------------------------- measuring


async def measure(corpus: list[dict[str, Any]], env: dict[str, str], work: Path) -> list[dict[str, Any]]:
    """Review every case with the app on PYTHONPATH; the tokens of each review and where they went."""
    from reviewer_app.core.states import JobState
    from tests.harness import REPO, harness

    out: list[dict[str, Any]] = []
    for index, case in enumerate(corpus):
        (work / f"case{index}").mkdir()
        async with harness(work / f"case{index}", **env) as h:
            if case.get("lose_first_answer"):
                h.anthropic.script_lost_answer()
            if case.get("findings"):
                h.anthropic.script_tool_answer(findings_answer(case, case["findings"]))
            entries = [f["entry"] for f in case["files"]]
            pull = h.github.add_pull(REPO, 1, files=entries, title=case["title"], body=case["body"])
            for f in case["files"]:
                if f["head"] is not None:
                    h.github.set_file(REPO, f["entry"]["filename"], f["head"], ref=pull.head_sha)
                if f["base"] is not None:
                    path = f["entry"].get("previous_filename") or f["entry"]["filename"]
                    h.github.set_file(REPO, path, f["base"], ref=pull.base_sha)
            answer = await h.deliver("pull_request", h.pr_payload(pull))
            job = await h.wait_state(answer["job_id"], JobState.SUCCEEDED, JobState.FAILED, timeout=60)
            attempts = await h.store.attempts_of(job.id)
            verified = [r for r in await h.store.usage_by_repo(since=0) if r["kind"] == "verification"]
            junk = {f["entry"]["filename"] for f in case["files"] if f.get("kind") in JUNK_KINDS}
            shown = junk_chars = 0
            for req in h.anthropic.message_requests:
                text = json.dumps(req.messages)
                for path, block in re.findall(r'<file path=\\"([^"\\]*)\\"(.*?)</file>', text, flags=re.S):
                    shown += len(block)
                    junk_chars += len(block) if path in junk else 0
            out.append(
                {
                    "name": case["name"],
                    "state": job.state.value,
                    "calls": len(h.anthropic.message_requests),
                    "input": sum(a.input_tokens + a.cache_creation_tokens + a.cache_read_tokens for a in attempts),
                    "attempts": [
                        {
                            "input": a.input_tokens,
                            "cache_write": a.cache_creation_tokens,
                            "cache_read": a.cache_read_tokens,
                        }
                        for a in attempts
                    ],
                    "split": {
                        "input": sum(a.input_tokens for a in attempts),
                        "cache_write": sum(a.cache_creation_tokens for a in attempts),
                        "cache_read": sum(a.cache_read_tokens for a in attempts),
                    },
                    "junk_share": junk_chars / shown if shown else 0.0,
                    "verify_model": next((r["model"] for r in verified if r["model"]), ""),
                    "verify": {
                        key: sum(int(r[column]) for r in verified)
                        for key, column in (
                            ("input", "input_tokens"),
                            ("cache_write", "cache_creation_tokens"),
                            ("cache_read", "cache_read_tokens"),
                            ("output", "output_tokens"),
                        )
                    },
                }
            )
    return out


def findings_answer(case: dict[str, Any], count: int) -> dict[str, Any]:
    """A review answer with ``count`` findings on added lines of the case's first files, each quoting its line (so the
    evidence check keeps it and the verification pass is asked about it, as about real findings): the verification's
    request is then the real one for findings of that number on that code."""
    comments: list[dict[str, Any]] = []
    for f in case["files"]:
        patch = f["entry"].get("patch") or ""
        line = 0
        for row in patch.split("\n"):
            header = re.match(r"@@ -\d+(?:,\d+)? \+(\d+)", row)
            if header:
                line = int(header[1])
                continue
            if row.startswith("+") and row[1:].strip() and len(comments) < count:
                comments.append(
                    {
                        "path": f["entry"]["filename"],
                        "line": line,
                        "side": "RIGHT",
                        "severity": "warning",
                        "body": "This line may not do what the change intends; check the case it misses.",
                        "quote": row[1:],
                        "failure": "A caller gets the wrong result for the case the change does not handle.",
                    }
                )
                break  # one finding per file: spread over the change, as a review's are
            if not row.startswith("-"):
                line += 1
        if len(comments) >= count:
            break
    return {"summary": "Risks: " + "; ".join(c["path"] for c in comments), "comments": comments}


def scope_stats(corpus: list[dict[str, Any]]) -> dict[str, int]:
    """Hunks of the corpus's modified files, and how many had their enclosing scope found."""
    from reviewer_app.core.diff import PatchParseError, parse_patch
    from reviewer_app.review.context import has_grammar, plan_context

    totals = {"hunks": 0, "by_parser": 0, "by_indentation": 0, "whole_file": 0, "parsed_hunks": 0, "parsed_found": 0}
    for case in corpus:
        for f in case["files"]:
            e = f["entry"]
            if e["status"] not in ("modified", "renamed") or "patch" not in e or f["head"] is None:
                continue
            try:
                diff = parse_patch(e["filename"], e["patch"])
            except PatchParseError:
                continue
            plan = plan_context(diff, f["head"])
            totals["hunks"] += plan.hunks
            if has_grammar(e["filename"]):
                totals["parsed_hunks"] += plan.hunks
                totals["parsed_found"] += plan.by_parser
            if "whole file" in plan.note:
                totals["whole_file"] += plan.hunks
            else:
                totals["by_parser"] += plan.by_parser
                totals["by_indentation"] += plan.by_indentation
    return totals


def run_measure(corpus: list[dict[str, Any]], env: dict[str, str], pythonpath: str) -> list[dict[str, Any]]:
    """``measure`` in a subprocess whose PYTHONPATH puts the code under test first."""
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "corpus.json").write_text(json.dumps(corpus))
        cmd = [
            sys.executable,
            str(Path(__file__).resolve()),
            "--measure",
            str(Path(tmp) / "corpus.json"),
            "--env",
            json.dumps(env),
        ]
        done = subprocess.run(cmd, capture_output=True, env={**os.environ, "PYTHONPATH": pythonpath}, cwd=ROOT)
        if done.returncode != 0:
            raise SystemExit(f"measuring failed:\n{done.stderr.decode()[-4000:]}")
        return json.loads(done.stdout)


def extract(ref: str, into: Path) -> None:
    data = subprocess.run(["git", "-C", str(ROOT), "archive", ref, "reviewer_app"], capture_output=True, check=True)
    with tarfile.open(fileobj=BytesIO(data.stdout)) as tar:
        tar.extractall(into, filter="data")


def summarize(
    corpus: list[dict[str, Any]],
    before: list[dict[str, Any]],
    plain: list[dict[str, Any]],
    after: list[dict[str, Any]],
    retry: dict[str, Any],
) -> dict[str, Any]:
    def med(rows: list[dict[str, Any]]) -> float:
        return statistics.median(r["input"] for r in rows if r["input"])

    pairs = [(b["input"], a["input"]) for b, a in zip(before, after, strict=True) if b["input"] and a["input"]]
    context = [(p["input"], a["input"]) for p, a in zip(plain, after, strict=True) if p["input"] and a["input"]]
    stats = scope_stats(corpus)
    found = stats["by_parser"] + stats["by_indentation"] + stats["whole_file"]
    generated = next(i for i, c in enumerate(corpus) if c["name"] == "generated")
    return {
        "cases": len(corpus),
        "median_input_before": med(before),
        "median_input_after_without_context": med(plain),
        "median_input_after": med(after),
        "median_ratio_after_to_before": statistics.median(a / b for b, a in pairs),
        "median_context_overhead": statistics.median(a / p - 1 for p, a in context),
        "p90_context_overhead": sorted(a / p - 1 for p, a in context)[int(0.9 * (len(context) - 1))],
        "hunks": stats["hunks"],
        "scope_found_share": found / stats["hunks"] if stats["hunks"] else 0.0,
        "scope_by_parser_share": stats["by_parser"] / stats["hunks"] if stats["hunks"] else 0.0,
        "scope_by_indentation_share": stats["by_indentation"] / stats["hunks"] if stats["hunks"] else 0.0,
        "whole_file_share": stats["whole_file"] / stats["hunks"] if stats["hunks"] else 0.0,
        "hunks_in_parsed_languages": stats["parsed_hunks"],
        "scope_by_parser_share_in_parsed_languages": (
            stats["parsed_found"] / stats["parsed_hunks"] if stats["parsed_hunks"] else 0.0
        ),
        "junk_share_before": before[generated]["junk_share"],
        "junk_share_after": after[generated]["junk_share"],
        "junk_share_after_all_cases": max(r["junk_share"] for r in after),
        "generated_case_input_before": before[generated]["input"],
        "generated_case_input_after": after[generated]["input"],
        "retry": retry,
    }


# ------------------------------------------------------------------------------------------------------ dollars


def percentile(values: list[float], share: float) -> float:
    """The nearest-rank percentile (share 0.5: the median, 0.9: the 90th)."""
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, round(share * len(ordered) + 0.5) - 1))]


def price_reviews(after: list[dict[str, Any]], model: str, output_tokens: int, output_cap: int) -> dict[str, Any]:
    """Dollars per review at the median and the 90th percentile of input tokens, priced with core/pricing.py's
    table: with the cache as the app uses it (each review alone, so its prompt is written to the cache and read
    only by a retry or a later part), without the cache (every token at the input price), and through Message
    Batches (half of either). The fakes do not write real answers, so output is priced at ``output_tokens`` (a
    summary and a handful of findings) and at ``output_cap`` (REVIEWER_MAX_OUTPUT_TOKENS, the most one answer
    may be)."""
    from reviewer_app.core.pricing import DEFAULT_PRICES, cost

    rows = [r for r in after if r["state"] == "succeeded" and r["input"]]
    out: dict[str, Any] = {"model": model, "reviews": len(rows), "output_tokens": output_tokens, "levels": {}}
    for name, share in (("median", 0.5), ("p90", 0.9)):
        total = percentile([r["input"] for r in rows], share)
        near = min(rows, key=lambda r: abs(r["input"] - total))  # a review of that size, for its cache split
        split = near["split"]
        level: dict[str, Any] = {"input_tokens": total, "cache_split_of_a_review_that_size": split}
        for output_name, output in (("typical_output", output_tokens), ("output_at_cap", output_cap)):
            cached = dict(
                input_tokens=split["input"],
                cache_creation_tokens=split["cache_write"],
                cache_read_tokens=split["cache_read"],
            )
            plain = dict(input_tokens=near["input"], cache_creation_tokens=0, cache_read_tokens=0)
            level[output_name] = {
                f"{way}{'_batched' if batched else ''}": cost(
                    DEFAULT_PRICES, model, output_tokens=output, batched=batched, **tokens
                ).dollars
                for way, tokens in (("with_cache", cached), ("without_cache", plain))
                for batched in (False, True)
            }
        out["levels"][name] = level
    verifying = [r for r in rows if r["verify"]["input"] or r["verify"]["cache_write"]]
    if verifying:
        totals = [r["verify"]["input"] + r["verify"]["cache_write"] + r["verify"]["cache_read"] for r in verifying]
        for name, share in (("median", 0.5), ("p90", 0.9)):
            total = percentile(totals, share)
            near = min(
                verifying,
                key=lambda r: abs(sum(r["verify"][k] for k in ("input", "cache_write", "cache_read")) - total),
            )
            v = near["verify"]
            # The fake's verdicts are one short line each; Claude's reasons run longer: priced at 80 tokens a verdict.
            output = max(v["output"], 80 * FINDINGS)
            dollars = cost(
                DEFAULT_PRICES,
                near["verify_model"] or model,  # the verification's own model (REVIEWER_VERIFY_MODEL)
                input_tokens=v["input"],
                output_tokens=output,
                cache_creation_tokens=v["cache_write"],
                cache_read_tokens=v["cache_read"],
                batched=False,
            ).dollars
            out["levels"][name]["verification"] = {
                "model": near["verify_model"],
                "input_tokens": total,
                "output_tokens": output,
                "dollars": dollars,
            }
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--commits", type=int, default=40, help="commits of the history to review (default 40)")
    parser.add_argument("--before", default=BEFORE_REF, help=f"the code to compare with (default {BEFORE_REF})")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--cost", action="store_true", help="dollars per review, this tree only (no comparison)")
    parser.add_argument("--model", default="claude-sonnet-4-5", help="model to price (--cost; default Sonnet 4.5)")
    parser.add_argument("--output-tokens", type=int, default=1000, help="output tokens of a typical answer (--cost)")
    parser.add_argument("--measure", help=argparse.SUPPRESS)
    parser.add_argument("--env", default="{}", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    logging.disable(logging.WARNING)
    if args.measure:
        corpus = json.loads(Path(args.measure).read_text())
        with tempfile.TemporaryDirectory() as tmp:
            print(json.dumps(asyncio.run(measure(corpus, json.loads(args.env), Path(tmp)))))
        return

    corpus = build_corpus(args.commits, args.before)
    here = f"{ROOT}"
    if args.cost:
        # Each review answers with FINDINGS findings, so its verification request is built on real code as in use.
        with_findings = [{**case, "findings": FINDINGS} for case in corpus]
        measured = run_measure(with_findings, {"REVIEWER_VERIFY": "1"}, here)  # as the server runs by default
        priced = price_reviews(measured, args.model, args.output_tokens, 4096)
        if args.json:
            print(json.dumps(priced, indent=2))
            return
        print(f"{priced['reviews']} reviews, {priced['model']}, US dollars per review")
        for name, level in priced["levels"].items():
            print(f"{name}: {level['input_tokens']:,} input tokens {level['cache_split_of_a_review_that_size']}")
            for output_name in ("typical_output", "output_at_cap"):
                print(f"  {output_name}: " + ", ".join(f"{k} ${v:.4f}" for k, v in level[output_name].items()))
            if "verification" in level:
                v = level["verification"]
                print(
                    f"  verification by {v['model']}: {v['input_tokens']:,} input, {v['output_tokens']} output, "
                    f"${v['dollars']:.4f}"
                )
        return
    with tempfile.TemporaryDirectory() as tmp:
        extract(args.before, Path(tmp))
        old_path = f"{tmp}{os.pathsep}{ROOT}"
        before = run_measure(corpus, {}, old_path)
        plain = run_measure(corpus, {"REVIEWER_CONTEXT_LINES": "0"}, here)
        after = run_measure(corpus, {}, here)
        # A retry after a lost answer: the generated case's first answer is processed, then lost.
        lost = [{**next(c for c in corpus if c["name"] == "generated"), "lose_first_answer": True}]
        retry_before = run_measure(lost, {}, old_path)[0]["attempts"]
        retry_after = run_measure(lost, {}, here)[0]["attempts"]
    result = summarize(corpus, before, plain, after, {"before": retry_before, "after": retry_after})
    if args.json:
        print(json.dumps({"summary": result, "before": before, "plain": plain, "after": after}, indent=2))
        return
    rows = [
        ("pull requests reviewed (history + generated case)", f"{result['cases']}"),
        ("median input tokens per review, before", f"{result['median_input_before']:,.0f}"),
        ("median input tokens per review, after, no context", f"{result['median_input_after_without_context']:,.0f}"),
        ("median input tokens per review, after", f"{result['median_input_after']:,.0f}"),
        ("median after / before", f"{result['median_ratio_after_to_before']:.2f}"),
        (
            "context overhead, median (p90)",
            f"{result['median_context_overhead']:+.0%} ({result['p90_context_overhead']:+.0%})",
        ),
        (
            "hunks whose scope was found (tree-sitter / indentation / small file whole)",
            f"{result['scope_found_share']:.0%} ({result['scope_by_parser_share']:.0%} / "
            f"{result['scope_by_indentation_share']:.0%} / {result['whole_file_share']:.0%} of {result['hunks']})",
        ),
        (
            "hunks in Python/JS/TS/Go files whose scope tree-sitter found",
            f"{result['scope_by_parser_share_in_parsed_languages']:.0%} of {result['hunks_in_parsed_languages']}",
        ),
        (
            "generated case: share of the diff on generated/lock/whitespace, before -> after",
            f"{result['junk_share_before']:.0%} -> {result['junk_share_after']:.0%}",
        ),
        (
            "generated case: input tokens, before -> after",
            f"{result['generated_case_input_before']:,} -> {result['generated_case_input_after']:,}",
        ),
        (
            "retry after a lost answer: cache read / input of attempt 2, before",
            "{cache_read:,} / {total:,}".format(
                cache_read=retry_before[-1]["cache_read"], total=sum(retry_before[-1].values())
            ),
        ),
        (
            "retry after a lost answer: cache read / input of attempt 2, after",
            "{cache_read:,} / {total:,}".format(
                cache_read=retry_after[-1]["cache_read"], total=sum(retry_after[-1].values())
            ),
        ),
    ]
    width = max(len(r[0]) for r in rows)
    for label, value in rows:
        print(f"{label:<{width}}  {value}")


if __name__ == "__main__":
    main()
