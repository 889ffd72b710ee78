"""GitHub requests per review, by the size of the pull request: the whole app against the fake GitHub, before and after.

Each pull request (1, 10, 40, 100 and 300 modified files by default; every file a small Python module with one
function changed, its text at both commits: tests/review/test_github_calls.py's ``sized_pull``) is reviewed once by
the whole app in-process (tests/harness.py: fake GitHub and fake Anthropic on loopback, the real SDK and clients,
SQLite), as the first review of a fresh process or (``--warm``) after one, when the installation token and the
App's login are known. Counted from the fake's request log, from the webhook to the check run's last update: every
HTTP request, those answered ``304 Not Modified`` (free), the REST requests on the installation's ``core`` limit,
the GraphQL requests and the points they cost (the fake counts them as GitHub documents), the archive's request (the
first review of a repository fetches it for the codebase at the head; later ones find it cached), the App's own requests
(JWT: tokens, /app), what the review cost the installation's limits (core + GraphQL points), and the requests by
route (``--routes``). ``--before REF`` measures the code of REF too (its ``reviewer_app`` extracted with `git
archive`, run in a subprocess against this tree's fakes).

    python bench/github_calls.py --before main           # this tree and main; --json for JSON; --sizes 1,10,40
    python bench/github_calls.py --before main --warm    # a second review of the process
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.append(str(ROOT))  # after PYTHONPATH: --before puts the code under test first

from bench.review_cost import extract  # noqa: E402  (the code of a ref, for --before)

SIZES = (1, 10, 40, 100, 300)
TARGET = 15  # requests per review, for any pull request up to 300 files (issue 30)
# The first review of a repository also fetches its archive for the codebase at the head (issue 40): one request more.
TARGET_FIRST = 16


async def measure(sizes: list[int], warm: bool) -> list[dict[str, Any]]:
    """Review one pull request of each size (``warm``: after a first review in the same process, so the installation
    token and the App's login are known); what GitHub was asked for each."""
    from tests.harness import harness
    from tests.review.test_github_calls import review_requests, sized_pull

    logging.disable(logging.WARNING)
    out: list[dict[str, Any]] = []
    for size in sizes:
        with tempfile.TemporaryDirectory() as tmp:
            async with harness(Path(tmp)) as h:
                if warm:
                    await review_requests(h, sized_pull(h, 2, 1, first=1000))  # a file no other review reads
                requests = await review_requests(h, sized_pull(h, 1, size))
                graphql = [r for r in requests if r.path == "/graphql"]
                rest = [r for r in requests if r.path != "/graphql"]
                points = sum(
                    ((r.response_json or {}).get("data") or {}).get("rateLimit", {}).get("cost", 1) for r in graphql
                )
                out.append(
                    {
                        "files": size,
                        "requests": len(requests),
                        "not_modified": sum(1 for r in requests if r.status == 304),
                        # What GitHub counts against the installation: its token's REST requests not answered 304
                        # (core), its GraphQL points; the App's own (JWT: tokens, /app) count against the App.
                        "core": sum(1 for r in rest if r.auth == "token" and r.status != 304),
                        "graphql_requests": len(graphql),
                        "graphql_points": points,
                        "app_jwt": sum(1 for r in requests if r.auth == "jwt"),
                        "archive": sum(1 for r in requests if "/tarball/" in r.path),
                        "by_route": dict(Counter(f"{r.method} {r.route or r.path}" for r in requests).most_common()),
                    }
                )
    return out


def run_measure(sizes: list[int], pythonpath: str, warm: bool) -> list[dict[str, Any]]:
    """``measure`` in a subprocess whose PYTHONPATH puts the code under test first."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--measure", ",".join(map(str, sizes))]
    cmd += ["--warm"] if warm else []
    done = subprocess.run(cmd, capture_output=True, env={**os.environ, "PYTHONPATH": pythonpath}, cwd=ROOT)
    if done.returncode != 0:
        raise SystemExit(f"measuring failed:\n{done.stderr.decode()[-4000:]}")
    return json.loads(done.stdout)


def table(rows: list[dict[str, Any]], title: str, target: int = TARGET) -> str:
    lines = [
        title,
        f"{'files':>6} {'requests':>9} {'of them 304':>12} {'core':>5} {'graphql (points)':>17} {'app JWT':>8}"
        f" {'installation limit':>19}  at most {target}?",
    ]
    for r in rows:
        budget = r["core"] + r["graphql_points"]
        lines.append(
            f"{r['files']:>6} {r['requests']:>9} {r['not_modified']:>12} {r['core']:>5}"
            f" {r['graphql_requests']:>10} ({r['graphql_points']:>3}) {r['app_jwt']:>8} {budget:>19}"
            f"  {'yes' if budget <= target else 'no'}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)), help="files per pull request, comma-separated")
    parser.add_argument("--before", metavar="REF", help="measure the code of REF too")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--routes", action="store_true", help="list the requests of each review by route")
    parser.add_argument("--warm", action="store_true", help="measure a second review of the process (token known)")
    parser.add_argument("--measure", help=argparse.SUPPRESS)  # internal: measure in this process, print JSON
    args = parser.parse_args(argv)
    if args.measure:
        print(json.dumps(asyncio.run(measure([int(s) for s in args.measure.split(",")], args.warm))))
        return
    sizes = [int(s) for s in args.sizes.split(",")]
    result: dict[str, Any] = {"after": run_measure(sizes, str(ROOT), args.warm)}
    if args.before:
        with tempfile.TemporaryDirectory() as tmp:
            extract(args.before, Path(tmp))
            result["before"] = run_measure(sizes, f"{tmp}{os.pathsep}{ROOT}", args.warm)
    if args.json:
        print(json.dumps(result, indent=2))
        return
    for name in ("before", "after"):
        if name in result:
            label = f"{name} ({args.before})" if name == "before" else "this tree"
            when = "a second review in the process" if args.warm else "the first review of a fresh process"
            title = f"{label}, {when}: GitHub requests per review (webhook to check run done)"
            print(table(result[name], title, TARGET if args.warm else TARGET_FIRST))
            if args.routes:
                for r in result[name]:
                    print(f"  {r['files']} files: " + ", ".join(f"{n} x {k}" for k, n in r["by_route"].items()))
            print()


if __name__ == "__main__":
    main()
