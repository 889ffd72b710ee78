"""GitHub requests per review, by the size of the pull request: the whole app against the fake GitHub, before and after.

Each pull request (1, 10, 40, 100 and 300 modified files by default; every file a small Python module with one
function changed, its text at both commits) is reviewed once by the whole app in-process (tests/harness.py: fake
GitHub and fake Anthropic on loopback, the real SDK and clients, SQLite). Counted from the fake's request log, from
the webhook to the check run's last update: every HTTP request (token fetches included), those answered ``304 Not
Modified``, the REST requests the fake counted against the installation's ``core`` limit, the GraphQL requests and
the points they cost (the fake counts them as GitHub documents: ``x-ratelimit-resource: graphql``), and the requests
by route. ``--before REF`` measures the code of REF too (its ``reviewer_app`` extracted with `git archive`, run in a
subprocess against this tree's fakes).

    python bench/github_calls.py                         # this tree; --json for JSON; --sizes 1,10,40
    python bench/github_calls.py --before main           # the code of main too, side by side
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import subprocess
import sys
import tarfile
import tempfile
from collections import Counter
from io import BytesIO
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SIZES = (1, 10, 40, 100, 300)
TARGET = 15  # requests per review, for any pull request up to 300 files (issue 30)


def module(index: int, changed: bool) -> str:
    """A small module; the head version changes one line of its middle function."""
    lines = [f'"""Module {index}."""', ""]
    for f in range(5):
        body = f"    return {f} + {index}" if not (changed and f == 2) else f"    return {f} * {index}  # changed"
        lines += [f"def f{f}(x):", "    y = x + 1", body, ""]
    return "\n".join(lines) + "\n"


def patch_of(index: int) -> str:
    old, new = module(index, False).split("\n"), module(index, True).split("\n")
    at = next(i for i, (a, b) in enumerate(zip(old, new, strict=True)) if a != b)
    start = max(at - 3, 0)
    context_after = old[at + 1 : at + 4]
    body = [" " + ln for ln in old[start:at]] + ["-" + old[at], "+" + new[at]] + [" " + ln for ln in context_after]
    count = at - start + 1 + len(context_after)
    return f"@@ -{start + 1},{count} +{start + 1},{count} @@\n" + "\n".join(body)


async def measure(sizes: list[int]) -> list[dict[str, Any]]:
    """Review one pull request of each size; what GitHub was asked for each."""
    from reviewer_app.core.states import JobState
    from tests.fakes.github import pull_file
    from tests.harness import REPO, harness

    logging.disable(logging.WARNING)
    out: list[dict[str, Any]] = []
    for size in sizes:
        with tempfile.TemporaryDirectory() as tmp:
            async with harness(Path(tmp)) as h:
                paths = [f"src/pkg{i // 50}/mod_{i}.py" for i in range(size)]
                entries = [pull_file(p, patch_of(i)) for i, p in enumerate(paths)]
                pull = h.github.add_pull(REPO, 1, files=entries)
                for i, p in enumerate(paths):
                    h.github.set_file(REPO, p, module(i, True), ref=pull.head_sha)
                    h.github.set_file(REPO, p, module(i, False), ref=pull.base_sha)
                seen = len(h.github.requests)
                answer = await h.deliver("pull_request", h.pr_payload(pull))
                job = await h.wait_check_synced(answer["job_id"], timeout=120)
                assert job.state is JobState.SUCCEEDED, job
                requests = h.github.requests[seen:]
                graphql = [r for r in requests if r.path == "/graphql"]
                points = (
                    sum(
                        int((r.response_json or {}).get("data", {}).get("rateLimit", {}).get("cost", 1) or 1)
                        for r in graphql
                    )
                    if graphql
                    else 0
                )
                out.append(
                    {
                        "files": size,
                        "requests": len(requests),
                        "not_modified": sum(1 for r in requests if r.status == 304),
                        "core": sum(1 for r in requests if r.path != "/graphql" and r.status != 304),
                        "graphql_requests": len(graphql),
                        "graphql_points": points,
                        "by_route": dict(Counter(f"{r.method} {r.route or r.path}" for r in requests).most_common()),
                    }
                )
    return out


def run_measure(sizes: list[int], pythonpath: str) -> list[dict[str, Any]]:
    """``measure`` in a subprocess whose PYTHONPATH puts the code under test first."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--measure", ",".join(map(str, sizes))]
    done = subprocess.run(cmd, capture_output=True, env={**os.environ, "PYTHONPATH": pythonpath}, cwd=ROOT)
    if done.returncode != 0:
        raise SystemExit(f"measuring failed:\n{done.stderr.decode()[-4000:]}")
    return json.loads(done.stdout)


def extract(ref: str, into: Path) -> None:
    data = subprocess.run(["git", "-C", str(ROOT), "archive", ref, "reviewer_app"], capture_output=True, check=True)
    with tarfile.open(fileobj=BytesIO(data.stdout)) as tar:
        tar.extractall(into, filter="data")


def table(rows: list[dict[str, Any]], title: str) -> str:
    lines = [
        title,
        f"{'files':>6} {'requests':>9} {'304':>5} {'core':>5} {'graphql':>8} {'points':>7}  within {TARGET}?",
    ]
    for r in rows:
        ok = "yes" if r["requests"] <= TARGET else "no"
        lines.append(
            f"{r['files']:>6} {r['requests']:>9} {r['not_modified']:>5} {r['core']:>5} {r['graphql_requests']:>8} "
            f"{r['graphql_points']:>7}  {ok}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)), help="files per pull request, comma-separated")
    parser.add_argument("--before", metavar="REF", help="measure the code of REF too")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--routes", action="store_true", help="list the requests of each review by route")
    parser.add_argument("--measure", help=argparse.SUPPRESS)  # internal: measure in this process, print JSON
    args = parser.parse_args(argv)
    if args.measure:
        print(json.dumps(asyncio.run(measure([int(s) for s in args.measure.split(",")]))))
        return
    sizes = [int(s) for s in args.sizes.split(",")]
    result: dict[str, Any] = {"after": run_measure(sizes, str(ROOT))}
    if args.before:
        with tempfile.TemporaryDirectory() as tmp:
            extract(args.before, Path(tmp))
            result["before"] = run_measure(sizes, f"{tmp}{os.pathsep}{ROOT}")
    if args.json:
        print(json.dumps(result, indent=2))
        return
    for name in ("before", "after"):
        if name in result:
            label = f"{name} ({args.before})" if name == "before" else "this tree"
            print(table(result[name], f"{label}: GitHub requests per review (webhook to check run completed)"))
            if args.routes:
                for r in result[name]:
                    print(f"  {r['files']} files: " + ", ".join(f"{n} x {k}" for k, n in r["by_route"].items()))
            print()


if __name__ == "__main__":
    main()
