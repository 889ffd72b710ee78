"""The git checkout a local review (`reviewer-app review --local`) reads: which commits it reviews (HEAD since a base:
the merge base with the remote's default branch unless one is named), the files they change as GitHub lists a pull
request's files, and any file or directory at a commit, read from git's own object database.

Only git plumbing is run, with external diff drivers and text conversion off: the checkout may hold anything, and
none of it is executed. Nothing is sent anywhere. Uncommitted changes are not part of the review (it reviews commits,
as a pre-push hook or a CI job sees them).
"""

from __future__ import annotations

import base64
import re
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MAX_FILE_BYTES = 1024 * 1024  # what GitHub's contents API serves whole; a larger file is reported unreadable
GIT_TIMEOUT_SECONDS = 60.0
EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"  # git's empty tree: the base of a repository's first commit
DEFAULT_BRANCHES = ("main", "master", "trunk", "develop")
_STATUS = {"A": "added", "D": "removed", "M": "modified", "R": "renamed", "C": "copied", "T": "changed"}
_REMOTE_NAME = re.compile(r"[:/]([A-Za-z0-9_.-]+)/([A-Za-z0-9_.-]+?)(?:\.git)?/?$")


class GitError(Exception):
    """git could not answer: not a checkout, an unknown revision, git missing. The message is one line."""


def git(root: Path, *args: str) -> bytes:
    """``git ARGS`` in ``root``: its standard output; GitError with git's first line of complaint otherwise."""
    try:
        done = subprocess.run(
            ["git", "--literal-pathspecs", "-C", str(root), "-c", "core.quotepath=off", *args],
            capture_output=True,
            timeout=GIT_TIMEOUT_SECONDS,
            check=False,
        )
    except FileNotFoundError:
        raise GitError("git is not installed (or not on the PATH)") from None
    except subprocess.TimeoutExpired:
        raise GitError(f"`git {args[0]}` took longer than {GIT_TIMEOUT_SECONDS:g} s") from None
    if done.returncode != 0:
        said = done.stderr.decode(errors="replace").strip().splitlines()
        raise GitError(said[0].removeprefix("fatal: ") if said else f"`git {args[0]}` failed ({done.returncode})")
    return done.stdout


def _text(root: Path, *args: str) -> str:
    return git(root, *args).decode(errors="replace").strip()


def _quiet(root: Path, *args: str) -> str | None:
    """``git ARGS``' output, or None when git says no (a ref that does not exist)."""
    try:
        return _text(root, *args) or None
    except GitError:
        return None


@dataclass(frozen=True)
class Commits:
    """What a local review reviews: the commits from ``base`` (exclusive) to ``head``, and where they come from."""

    root: Path
    head: str
    base: str  # the commit the diff starts from (the merge base), or git's empty tree
    base_label: str  # how the base was chosen, for a person: "the merge base with origin/main"
    branch: str  # HEAD's branch ("HEAD" when detached)
    repo: str  # owner/name from the remote's URL, else the checkout's directory name
    messages: tuple[str, ...] = field(default=())  # the commits' messages, newest first

    @property
    def title(self) -> str:
        if len(self.messages) == 1:
            return self.messages[0].split("\n", 1)[0]
        return f"{len(self.messages)} commits on {self.branch}"

    @property
    def description(self) -> str:
        return "\n\n".join(m.strip() for m in self.messages)


def open_commits(where: Path, base: str | None) -> Commits:
    """The commits of the checkout at ``where`` since ``base`` (any revision git knows), or since the default base."""
    root = Path(_text(where, "rev-parse", "--show-toplevel"))
    head = _text(root, "rev-parse", "--verify", "HEAD^{commit}")
    if base is not None:
        target = _quiet(root, "rev-parse", "--verify", "--end-of-options", f"{base}^{{commit}}")
        if target is None:
            raise GitError(f"{base!r} is not a commit of this repository")
        merge = _quiet(root, "merge-base", target, head)
        if merge is None:
            raise GitError(f"{base!r} has no history in common with HEAD")
        start, label = merge, f"the merge base with {base}"
    else:
        start, label = default_base(root, head)
    messages = _messages(root, start, head)
    branch = _quiet(root, "rev-parse", "--abbrev-ref", "HEAD") or "HEAD"
    return Commits(root, head, start, label, branch, repo_name(root), messages)


def default_base(root: Path, head: str) -> tuple[str, str]:
    """The merge base with the remote's default branch (origin's, else the first remote's); without a remote, with a
    local default branch that is not HEAD's own; else HEAD's parent (the last commit reviewed); for a repository of
    one commit, the empty tree (everything reviewed)."""
    remotes = _text(root, "remote").split()
    for remote in sorted(remotes, key=lambda r: r != "origin"):
        branch = _quiet(root, "symbolic-ref", "--quiet", f"refs/remotes/{remote}/HEAD")
        candidates = [branch] if branch else [f"refs/remotes/{remote}/{b}" for b in DEFAULT_BRANCHES]
        for ref in candidates:
            merge = _quiet(root, "merge-base", ref, head)
            if merge is not None:
                return merge, f"the merge base with {ref.removeprefix('refs/remotes/')}"
    current = _quiet(root, "symbolic-ref", "--quiet", "--short", "HEAD")
    for name in DEFAULT_BRANCHES:
        if name == current:
            continue
        merge = _quiet(root, "merge-base", f"refs/heads/{name}", head)
        if merge is not None and merge != head:
            return merge, f"the merge base with {name} (no remote to compare with)"
    parent = _quiet(root, "rev-parse", "--verify", "--quiet", f"{head}^")
    if parent is not None:
        return parent, "HEAD's parent: the last commit (no remote or other default branch to compare with)"
    return EMPTY_TREE, "the empty tree: this is the repository's first commit"


def _messages(root: Path, base: str, head: str) -> tuple[str, ...]:
    span = head if base == EMPTY_TREE else f"{base}..{head}"
    raw = git(root, "log", "--no-color", "-z", "--format=%B", span).decode(errors="replace")
    return tuple(m.strip() for m in raw.split("\0") if m.strip())


def repo_name(root: Path) -> str:
    """owner/name as the remote's URL says it (origin's first), else "local/DIRECTORY"."""
    for remote in sorted(_text(root, "remote").split(), key=lambda r: r != "origin"):
        url = _quiet(root, "remote", "get-url", remote) or ""
        found = _REMOTE_NAME.search(url)
        if found:
            return f"{found.group(1)}/{found.group(2)}"
    return f"local/{root.name}"


# -- the change, as GitHub lists a pull request's files ----------------------------------------------------------


def changed_files(commits: Commits) -> list[dict[str, Any]]:
    """The files changed from the base to the head, each as GitHub's "list pull request files" gives it: filename,
    status, additions, deletions, changes, the head's blob sha, previous_filename for a rename, and its patch (hunks
    only, none for a binary file)."""
    root, span = commits.root, (commits.base, commits.head)
    common = ("-M", "--no-ext-diff", "--no-textconv", "--no-color", "--full-index")
    raw = git(root, "diff", "--raw", "-z", *common, *span).split(b"\0")
    entries: list[dict[str, Any]] = []
    i = 0
    while i < len(raw) - 1:
        meta = raw[i].decode(errors="replace").lstrip(":").split()
        kind = meta[4][0]
        paths = [raw[i + 1].decode(errors="replace")]
        i += 2
        if kind in "RC":
            paths.append(raw[i].decode(errors="replace"))
            i += 1
        entry: dict[str, Any] = {"filename": paths[-1], "status": _STATUS.get(kind, "modified")}
        entry["sha"] = meta[2] if kind == "D" else meta[3]
        if kind in "RC":
            entry["previous_filename"] = paths[0]
        if meta[1] == "160000" or meta[0] == "160000":
            entry["submodule"] = True
        entries.append(entry)
    patches = _patches(git(root, "diff", "--patch", "-U3", "--src-prefix=a/", "--dst-prefix=b/", *common, *span))
    if len(patches) != len(entries):  # never expected; each file is then diffed on its own
        patches = [_one_patch(commits, e, common) for e in entries]
    for entry, patch in zip(entries, patches, strict=True):
        adds = sum(1 for line in patch.split("\n") if line.startswith("+"))
        dels = sum(1 for line in patch.split("\n") if line.startswith("-"))
        entry.update(additions=adds, deletions=dels, changes=adds + dels)
        if patch and not entry.pop("submodule", False):
            entry["patch"] = patch
    return entries


def _patches(out: bytes) -> list[str]:
    """Each file's hunks of a ``git diff --patch`` (as GitHub's ``patch`` field holds them), in the diff's order."""
    text = out.decode(errors="replace")
    chunks = re.split(r"^diff --git ", text, flags=re.MULTILINE)[1:]
    return [_hunks(chunk) for chunk in chunks]


def _hunks(chunk: str) -> str:
    start = re.search(r"^@@ ", chunk, flags=re.MULTILINE)
    return "" if start is None else chunk[start.start() :].rstrip("\n")


def _one_patch(commits: Commits, entry: dict[str, Any], common: Sequence[str]) -> str:
    paths = [p for p in (entry.get("previous_filename"), entry["filename"]) if p]
    out = git(commits.root, "diff", "--patch", "-U3", *common, commits.base, commits.head, "--", *paths)
    return _hunks(out.decode(errors="replace"))


# -- files and directories at a commit ---------------------------------------------------------------------------


@dataclass(frozen=True)
class TreeEntry:
    mode: str
    kind: str  # blob, tree, commit (a submodule)
    sha: str
    size: int | None
    path: str


def tree_entries(root: Path, ref: str, path: str, *, inside: bool) -> list[TreeEntry]:
    """``path`` at ``ref`` (inside=False: the entry itself), or what the directory ``path`` holds (inside=True)."""
    spec = path.strip("/")
    if inside:
        spec = f"{spec}/" if spec else "."
    out = git(root, "ls-tree", "-z", "--long", "--full-tree", ref, "--", spec)
    rows = []
    for row in out.split(b"\0"):
        if not row:
            continue
        meta, _, name = row.decode(errors="replace").partition("\t")
        mode, kind, sha, size = meta.split()
        rows.append(TreeEntry(mode, kind, sha, int(size) if size.isdigit() else None, name))
    return rows


def read_blob(root: Path, sha: str) -> bytes:
    return git(root, "cat-file", "blob", sha)


def file_at(root: Path, ref: str, path: str) -> bytes | None:
    """The bytes of the file ``path`` at ``ref``; None when it is missing, not a file, or over MAX_FILE_BYTES."""
    found = [e for e in tree_entries(root, ref, path, inside=False) if e.path == path.strip("/")]
    if not found or found[0].kind != "blob" or found[0].mode == "120000":
        return None
    if found[0].size is not None and found[0].size > MAX_FILE_BYTES:
        return None
    return read_blob(root, found[0].sha)


def contents_at(root: Path, ref: str, path: str) -> dict[str, Any] | list[dict[str, Any]] | None:
    """``path`` at ``ref`` in the shape of GitHub's contents API: a file (base64), a directory's entries, or None."""
    clean = path.strip("/")
    if clean:
        found = [e for e in tree_entries(root, ref, clean, inside=False) if e.path == clean]
        if not found:
            return None
        entry = found[0]
        if entry.kind == "blob" and entry.mode != "120000":
            if entry.size is not None and entry.size > MAX_FILE_BYTES:
                return {"type": "file", "path": clean, "size": entry.size, "encoding": "none", "content": ""}
            data = read_blob(root, entry.sha)
            return {"type": "file", "path": clean, "encoding": "base64", "content": base64.b64encode(data).decode()}
        if entry.kind != "tree":
            return {"type": "symlink" if entry.mode == "120000" else "submodule", "path": clean}
    listing = []
    for e in tree_entries(root, ref, clean, inside=True):
        kind = {"tree": "dir", "commit": "submodule"}.get(e.kind, "symlink" if e.mode == "120000" else "file")
        listing.append({"type": kind, "name": e.path.rsplit("/", 1)[-1], "path": e.path})
    return listing
