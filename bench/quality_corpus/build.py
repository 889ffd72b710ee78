"""Materialise the review-quality corpus from the manifest and local repository snapshots.

Each case in ``manifest.toml`` names a public repository, the commit that introduced a defect (the
"source" change under review), the later commit(s) that fixed it, and the known issues at line
numbers of the source commit's after-state. This script reads the source commit's changed files out
of a bare git directory per repository (by default ``/work/.mirror/<owner>+<name>/repo``, the
layout the ``fetch`` tool leaves) and writes one ``<id>.json`` per case next to this file, in the
format described in README.md.

Usage: python bench/quality_corpus/build.py [--mirror DIR] [--only ID ...] [--show] [--sources] [--tree]
``--show`` prints each known issue's head line so the line numbers can be checked by eye; ``--sources``
rewrites SOURCES.md from the manifest alone (no snapshots needed); ``--tree`` also writes ``<id>.tree.tar.gz``, the
whole repository at the base commit (the source commit's parent, ``git archive``), which the benchmark serves as the
repository's archive so the codebase room has the tree the pull request changes.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tomllib
from pathlib import Path

HERE = Path(__file__).resolve().parent
MAX_FILES = 6
MAX_CHANGED_LINES = 1500


def git(git_dir: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "--git-dir", str(git_dir), *args],
        capture_output=True,
        check=True,
    )
    return done.stdout.decode("utf-8")


def blob(git_dir: Path, sha: str, path: str) -> str:
    return git(git_dir, "show", f"{sha}:{path}")


def changed_files(git_dir: Path, sha: str) -> list[tuple[str, str | None, str | None]]:
    """(path, base path or None if added, head path or None if deleted) per file the commit touched."""
    out = git(git_dir, "diff-tree", "--no-commit-id", "-r", "-M", "--name-status", f"{sha}^", sha)
    rows = []
    for line in out.splitlines():
        status, *paths = line.split("\t")
        if status.startswith("R"):
            rows.append((paths[1], paths[0], paths[1]))
        elif status == "A":
            rows.append((paths[0], None, paths[0]))
        elif status == "D":
            rows.append((paths[0], paths[0], None))
        else:
            rows.append((paths[0], paths[0], paths[0]))
    return rows


def changed_lines(git_dir: Path, sha: str, paths: list[str]) -> int:
    out = git(git_dir, "diff", "--numstat", "-M", f"{sha}^", sha, "--", *paths)
    total = 0
    for line in out.splitlines():
        added, deleted, _ = line.split("\t", 2)
        if added != "-":
            total += int(added) + int(deleted)
    return total


def commit_url(repo: str, sha: str) -> str:
    return f"https://github.com/{repo}/commit/{sha}"


def full_sha(git_dir: Path, sha: str) -> str:
    return git(git_dir, "rev-parse", "--verify", f"{sha}^{{commit}}").strip()


def build_case(case: dict, mirror: Path) -> dict:
    repo = case["repo"]
    git_dir = mirror / repo.replace("/", "+") / "repo"
    sha = full_sha(git_dir, case["source"])
    parents = git(git_dir, "log", "-1", "--format=%P", sha).split()
    if len(parents) != 1:
        raise ValueError(f"{case['id']}: the source commit must have exactly one parent")
    message = git(git_dir, "log", "-1", "--format=%B", sha).strip()
    title, _, body = message.partition("\n")
    wanted = case.get("files")
    files = []
    for path, base_path, head_path in changed_files(git_dir, sha):
        if wanted is not None and path not in wanted:
            continue
        files.append(
            {
                "path": path,
                "base": None if base_path is None else blob(git_dir, f"{sha}^", base_path),
                "head": None if head_path is None else blob(git_dir, sha, head_path),
            }
        )
    if not files or len(files) > MAX_FILES:
        raise ValueError(f"{case['id']}: {len(files)} files; a case keeps 1..{MAX_FILES}")
    changed = changed_lines(git_dir, sha, [f["path"] for f in files])
    if changed > MAX_CHANGED_LINES:
        raise ValueError(f"{case['id']}: {changed} changed lines; a case keeps at most {MAX_CHANGED_LINES}")
    fixes = case["fix"] if isinstance(case["fix"], list) else [case["fix"]]
    fixes = [full_sha(git_dir, fix) for fix in fixes]
    heads = {f["path"]: f["head"] for f in files}
    issues = []
    for item in case["issue"]:
        head = heads.get(item["path"])
        if head is None:
            raise ValueError(f"{case['id']}: known issue in {item['path']}, which has no head text")
        if not 1 <= item["line"] <= len(head.splitlines()):
            raise ValueError(f"{case['id']}: line {item['line']} is outside {item['path']}")
        issue = {"path": item["path"], "line": item["line"], "issue": item["issue"]}
        if "needs" in item:  # the file outside the change that shows the defect (a cross-file case)
            issue["needs"] = item["needs"]
        if "fix" in item:
            issue["fix"] = commit_url(repo, full_sha(git_dir, item["fix"]))
        issues.append(issue)
    return {
        "id": case["id"],
        "language": case["language"],
        "repo": repo,
        "license": case["license"],
        "source": commit_url(repo, sha),
        "fix": commit_url(repo, fixes[0]),
        "title": title.strip(),
        "body": body.strip(),
        "files": files,
        "known_issues": issues,
    }


def write_tree(case: dict, mirror: Path, dest: Path) -> int:
    """The repository at the base commit as a gzipped tar (``git archive``); its size in bytes."""
    git_dir = mirror / case["repo"].replace("/", "+") / "repo"
    sha = full_sha(git_dir, case["source"])
    with dest.open("wb") as out:
        subprocess.run(
            ["git", "--git-dir", str(git_dir), "archive", "--format=tar.gz", f"{sha}^"], stdout=out, check=True
        )
    return dest.stat().st_size


def sources_table(cases: list[dict]) -> str:
    """SOURCES.md: every case with its repository, source and fix commits, licence and a one-line summary."""
    lines = [
        "# Sources of the review-quality corpus",
        "",
        "Generated by `build.py --sources` from `manifest.toml`. Each source commit introduced the known issue(s); each",
        "fix commit is the later change in the same repository that shows what was wrong.",
        "",
        "| id | language | repo | source | fix | licence | summary |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for case in cases:
        repo = case["repo"]
        fixes = case["fix"] if isinstance(case["fix"], list) else [case["fix"]]
        fix_links = ", ".join(f"[{fix[:10]}]({commit_url(repo, fix)})" for fix in fixes)
        source_link = f"[{case['source'][:10]}]({commit_url(repo, case['source'])})"
        summary = case["summary"].replace("|", "\\|")
        lines.append(
            f"| {case['id']} | {case['language']} | {repo} | {source_link} | {fix_links} | {case['license']} | {summary} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mirror", type=Path, default=Path("/work/.mirror"))
    parser.add_argument("--only", nargs="*", default=None)
    parser.add_argument("--show", action="store_true")
    parser.add_argument("--sources", action="store_true", help="only rewrite SOURCES.md from the manifest")
    parser.add_argument("--tree", action="store_true", help="also write <id>.tree.tar.gz (the base commit's tree)")
    args = parser.parse_args(argv)
    manifest = tomllib.loads((HERE / "manifest.toml").read_text())
    if args.sources:
        (HERE / "SOURCES.md").write_text(sources_table(manifest["case"]))
        return 0
    for case in manifest["case"]:
        if args.only and case["id"] not in args.only:
            continue
        built = build_case(case, args.mirror)
        (HERE / f"{case['id']}.json").write_text(json.dumps(built, indent=1, ensure_ascii=False) + "\n")
        print(f"{case['id']}: {len(built['files'])} files, {len(built['known_issues'])} known issues")
        if args.tree:
            size = write_tree(case, args.mirror, HERE / f"{case['id']}.tree.tar.gz")
            print(f"   tree at the base commit: {size:,} bytes")
        if args.show:
            heads = {f["path"]: f["head"].splitlines() for f in built["files"] if f["head"]}
            for item in built["known_issues"]:
                lines = heads[item["path"]]
                for n in range(max(1, item["line"] - 1), min(len(lines), item["line"] + 1) + 1):
                    mark = ">>" if n == item["line"] else "  "
                    print(f"   {mark} {item['path']}:{n}: {lines[n - 1][:110]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
