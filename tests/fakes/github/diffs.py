"""A pull request's files as GitHub lists them, and the lines of a patch a review comment may sit on."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from tests.fakes.github.shapes import Json, blob_sha

_HUNK_RE = re.compile(r"^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@")


def commentable_lines(patch: str) -> tuple[set[int], set[int]]:
    """The (LEFT, RIGHT) line numbers of a patch a review comment may sit on: its hunks' lines."""
    left: set[int] = set()
    right: set[int] = set()
    for hunk_left, hunk_right in hunk_lines(patch):
        left |= hunk_left
        right |= hunk_right
    return left, right


def hunk_lines(patch: str) -> list[tuple[set[int], set[int]]]:
    """The (LEFT, RIGHT) line numbers of each hunk of a patch: removed and context lines by their old number, added
    and context lines by their new one."""
    hunks: list[tuple[set[int], set[int]]] = []
    old = new = 0
    for line in patch.removesuffix("\n").split("\n"):  # GitHub splits on "\n" only, never on \f, \v or U+2028
        match = _HUNK_RE.match(line)
        if match:
            old, new = int(match[1]), int(match[2])
            hunks.append((set(), set()))
        elif not hunks or line.startswith("\\"):  # "\ No newline at end of file"
            continue
        elif line.startswith("+"):
            hunks[-1][1].add(new)
            new += 1
        elif line.startswith("-"):
            hunks[-1][0].add(old)
            old += 1
        else:
            hunks[-1][0].add(old)
            hunks[-1][1].add(new)
            old += 1
            new += 1
    return hunks


def pull_file(
    filename: str,
    patch: str | None = None,
    *,
    status: str = "modified",
    additions: int | None = None,
    deletions: int | None = None,
    previous_filename: str | None = None,
) -> Json:
    """A GitHub-shaped entry of a PR's file list; counts come from ``patch`` unless given."""
    lines = patch.removesuffix("\n").split("\n") if patch else []
    adds = sum(1 for ln in lines if ln.startswith("+")) if additions is None else additions
    dels = sum(1 for ln in lines if ln.startswith("-")) if deletions is None else deletions
    entry: Json = {
        "sha": blob_sha(f"{filename}\n{patch}"),
        "filename": filename,
        "status": status,
        "additions": adds,
        "deletions": dels,
        "changes": adds + dels,
    }
    if patch is not None:  # GitHub leaves ``patch`` out for binary and very large diffs
        entry["patch"] = patch
    if previous_filename is not None:
        entry["previous_filename"] = previous_filename
    return entry


def added_file(filename: str, lines: Iterable[str]) -> Json:
    """A file the PR adds, with ``lines`` as its content (all commentable on the RIGHT side)."""
    body = list(lines)
    patch = f"@@ -0,0 +1,{len(body)} @@\n" + "\n".join("+" + ln for ln in body)
    return pull_file(filename, patch, status="added")


def normalize_file(entry: Json) -> Json:
    known = {k: entry[k] for k in ("status", "additions", "deletions", "previous_filename") if k in entry}
    full = pull_file(entry["filename"], entry.get("patch"), **known)
    full.update(entry)
    return full


def file_urls(repo: str, ref: str, entry: Json, tree: Mapping[str, str] | None = None) -> Json:
    """A pull request's or comparison's file with the URLs GitHub's `diff-entry` carries, and the SHA of its blob at
    ``ref`` when the fake holds its text there (``tree``: the files at ``ref``), as GitHub's is."""
    path = entry["filename"]
    held = (tree or {}).get(path)
    return {
        **entry,
        **({"sha": blob_sha(held)} if held is not None and entry.get("status") != "removed" else {}),
        "blob_url": f"https://github.com/{repo}/blob/{ref}/{path}",
        "raw_url": f"https://github.com/{repo}/raw/{ref}/{path}",
        "contents_url": f"https://api.github.com/repos/{repo}/contents/{path}?ref={ref}",
    }
