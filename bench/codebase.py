"""The codebase at the head, timed: fetch (from the fake GitHub's archive route on loopback), unpack and index a real
repository's archive, then bring the index to a new head that changes a few files; the time and peak memory of each.

The archive is built locally with `git archive` from a git directory (a mirror brought with the search tool's
``fetch``, or any clone), with GitHub's top folder ``owner-repo-sha7/``. Each phase runs in a fresh process (as a
later review on another worker would), sharing the cache folder; memory is the process's peak resident set, the
interpreter, the fake GitHub and the archive's bytes included (``--workers 1`` parses in that process; by default worker
processes, one per core, share the parsing and each holds an interpreter and the grammars of its own).

    python bench/codebase.py --git-dir /work/.mirror/sveltejs+svelte/repo       # --changed 5, --json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

REPO = "bench-org/project"
INSTALLATION = 5
FIRST_SECONDS, FIRST_MB, NEXT_SECONDS = 30.0, 500.0, 2.0  # the targets (issue 40)


def build_archive(git_dir: Path, ref: str) -> tuple[bytes, str, int]:
    """The repository at ``ref`` as GitHub's tarball: gzipped, under ``owner-repo-sha7/``; its commit and files."""
    sha = subprocess.run(
        ["git", f"--git-dir={git_dir}", "rev-parse", ref], capture_output=True, text=True, check=True
    ).stdout.strip()
    prefix = f"{REPO.replace('/', '-')}-{sha[:7]}/"
    data = subprocess.run(
        ["git", f"--git-dir={git_dir}", "archive", "--format=tar.gz", f"--prefix={prefix}", sha],
        capture_output=True,
        check=True,
    ).stdout
    files = subprocess.run(
        ["git", f"--git-dir={git_dir}", "ls-tree", "-r", "--name-only", sha], capture_output=True, text=True
    ).stdout.count("\n")
    return data, sha, files


async def phase(
    archive: bytes, sha: str, cache: Path, changed: dict[str, str], workers: int | None = None
) -> dict[str, Any]:
    """One review's opening of the codebase against the fake GitHub serving ``archive``."""
    import aiohttp

    from reviewer_app.codebase import ChangedText, CodebaseSettings, open_codebase
    from reviewer_app.codebase.snapshot import Snapshot
    from reviewer_app.github.auth import AppCredentials
    from reviewer_app.github.client import GitHubClient
    from tests.fakes.github import FakeGitHub, running

    fake = FakeGitHub()
    fake.add_installation(INSTALLATION, REPO.split("/")[0])
    repo = fake.add_repo(REPO, INSTALLATION)
    repo.parents[sha] = None
    fake.crafted_archives[REPO] = archive
    settings = CodebaseSettings(cache_dir=cache, index_workers=workers)
    async with running(fake) as url, aiohttp.ClientSession() as session:
        client = GitHubClient(session, url, AppCredentials(str(fake.app_id), fake.private_key))
        await client.tokens.get(INSTALLATION, REPO)  # the token is minted before the clock starts
        started = time.perf_counter()
        codebase = await open_codebase(
            client,
            settings,
            installation_id=INSTALLATION,
            repo=REPO,
            base_ref="main",
            base_sha=sha,
            head_sha="f" * 40,
            changed={p: ChangedText(p, t) for p, t in changed.items()},
        )
        seconds = time.perf_counter() - started
        assert isinstance(codebase, Snapshot), "the codebase could not be opened (see the log)"
        probe = next(iter(changed), None) or next(p for p in sorted(codebase.files) if codebase.index.tags(p))
        t0 = time.perf_counter()
        related, left_out = codebase.related(probe, 1, 40, budget_tokens=6000)
        related_seconds = time.perf_counter() - t0
        t0 = time.perf_counter()
        codebase.search_code("function", limit=50)
        search_seconds = time.perf_counter() - t0
        return {
            "seconds": round(seconds, 2),
            "base_tree_seconds": round(codebase.timings.get("base_tree", 0), 2),
            "index_seconds": round(codebase.timings.get("index", 0), 2),
            "peak_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
            "files": len(codebase.files),
            "parsed": codebase.parsed,
            "indexed": len(codebase.index.files),
            "tarball_requests": len(fake.requests_matching("GET", r"/tarball/")),
            "related": {
                "path": probe,
                "snippets": len(related),
                "left_out": left_out,
                "ms": round(related_seconds * 1000),
            },
            "search_ms": round(search_seconds * 1000),
        }


def changes(git_dir: Path, sha: str, count: int) -> dict[str, str]:
    """``count`` source files of the tree, each with a new function appended: a later head's changed files."""
    names = subprocess.run(
        ["git", f"--git-dir={git_dir}", "ls-tree", "-r", "--name-only", sha], capture_output=True, text=True
    ).stdout.split("\n")
    sources = [n for n in names if n.endswith((".py", ".ts", ".js", ".go")) and "/test" not in n][::97][:count]
    out: dict[str, str] = {}
    for path in sources:
        text = subprocess.run(
            ["git", f"--git-dir={git_dir}", "show", f"{sha}:{path}"], capture_output=True, text=True
        ).stdout
        extra = (
            "\n\ndef bench_added(x):\n    return x\n"
            if path.endswith(".py")
            else "\n\nfunction benchAdded(x) { return x }\n"
        )
        out[path] = text + extra
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--git-dir", type=Path, help="a git directory (a mirror or a clone's .git)")
    parser.add_argument("--ref", default="HEAD")
    parser.add_argument("--changed", type=int, default=5, help="files the later head changes")
    parser.add_argument("--workers", type=int, help="processes parsing the first tree (default: one per core)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--phase", help=argparse.SUPPRESS)  # internal: archive, sha, cache, changes file
    args = parser.parse_args(argv)
    if args.phase:
        archive, sha, cache, changed_file = args.phase.split(",")
        changed = json.loads(Path(changed_file).read_text()) if changed_file else {}
        data = Path(archive).read_bytes()
        print(json.dumps(asyncio.run(phase(data, sha, Path(cache), changed, args.workers))))
        return
    if args.git_dir is None:
        parser.error("--git-dir is required")
    data, sha, files = build_archive(args.git_dir, args.ref)
    with tempfile.TemporaryDirectory() as tmp:
        archive, cache, changed_file = Path(tmp, "archive.tar.gz"), Path(tmp, "cache"), Path(tmp, "changed.json")
        archive.write_bytes(data)
        changed_file.write_text(json.dumps(changes(args.git_dir, sha, args.changed)))

        def run(changes_path: str) -> dict[str, Any]:
            done = subprocess.run(
                [sys.executable, __file__, "--phase", f"{archive},{sha},{cache},{changes_path}"]
                + ([f"--workers={args.workers}"] if args.workers else []),
                capture_output=True,
                text=True,
                cwd=ROOT,
                env={**os.environ, "PYTHONPATH": str(ROOT)},
            )
            if done.returncode != 0:
                raise SystemExit(f"the phase failed:\n{done.stderr[-3000:]}")
            return json.loads(done.stdout.strip().splitlines()[-1])

        first = run("")
        later = run(str(changed_file))
    result = {"repository": str(args.git_dir), "commit": sha, "files": files, "archive_mb": round(len(data) / 2**20, 1)}
    result |= {"first": first, "later_head": later}
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"{args.git_dir} at {sha[:12]}: {files} files, archive {result['archive_mb']} MB")
    print(
        f"first review  : {first['seconds']:6.2f} s (archive {first['base_tree_seconds']:.2f} s, index "
        f"{first['index_seconds']:.2f} s), peak {first['peak_mb']:6.1f} MB, {first['parsed']} files parsed, "
        f"{first['tarball_requests']} archive request  (targets: {FIRST_SECONDS:.0f} s, {FIRST_MB:.0f} MB: "
        f"{'met' if first['seconds'] <= FIRST_SECONDS and first['peak_mb'] <= FIRST_MB else 'NOT met'})"
    )
    print(
        f"later head    : {later['seconds']:6.2f} s, peak {later['peak_mb']:6.1f} MB, {later['parsed']} files parsed, "
        f"{later['tarball_requests']} archive requests  (target: {NEXT_SECONDS:.0f} s: "
        f"{'met' if later['seconds'] <= NEXT_SECONDS else 'NOT met'})"
    )
    print(
        f"related() on {later['related']['path']}: {later['related']['snippets']} snippets, "
        f"{later['related']['left_out']} left out, {later['related']['ms']} ms; search_code: {later['search_ms']} ms"
    )


if __name__ == "__main__":
    main()
