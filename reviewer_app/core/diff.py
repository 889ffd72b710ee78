"""One file's diff as GitHub sends it (the ``patch`` of GET /pulls/{n}/files), parsed into commentable lines."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from unidiff import PatchSet, UnidiffParseError
from unidiff.patch import Line

from reviewer_app.core.review_model import Side

LineKind = Literal["added", "removed", "context"]
_KINDS: dict[str, LineKind] = {"+": "added", "-": "removed", " ": "context"}


class PatchParseError(ValueError):
    """GitHub's patch for a file is not a sequence of unified-diff hunks."""

    def __init__(self, path: str, detail: str) -> None:
        super().__init__(f"cannot parse the patch of {path}: {detail}")
        self.path = path


@dataclass(frozen=True)
class DiffLine:
    """One line of a hunk; ``old_line`` is None for added lines, ``new_line`` None for removed ones."""

    kind: LineKind
    old_line: int | None
    new_line: int | None
    text: str


@dataclass(frozen=True)
class Hunk:
    """One ``@@ -old_start,old_length +new_start,new_length @@ section`` block."""

    old_start: int
    old_length: int
    new_start: int
    new_length: int
    section: str
    lines: tuple[DiffLine, ...]

    @property
    def header(self) -> str:
        head = f"@@ -{self.old_start},{self.old_length} +{self.new_start},{self.new_length} @@"
        return f"{head} {self.section}" if self.section else head


@dataclass(frozen=True)
class FileDiff:
    """A file's hunks, and GitHub's patch text they were parsed from. No hunks: no text changes were sent."""

    path: str
    hunks: tuple[Hunk, ...] = ()
    status: str = "modified"
    previous_path: str | None = None
    patch: str = ""

    @property
    def added_lines(self) -> frozenset[int]:
        """New-side numbers of added lines."""
        return frozenset(ln.new_line for ln in self._lines("added") if ln.new_line is not None)

    @property
    def removed_lines(self) -> frozenset[int]:
        """Old-side numbers of removed lines."""
        return frozenset(ln.old_line for ln in self._lines("removed") if ln.old_line is not None)

    @property
    def additions(self) -> int:
        return sum(1 for _ in self._lines("added"))

    @property
    def deletions(self) -> int:
        return sum(1 for _ in self._lines("removed"))

    @property
    def changes(self) -> int:
        return self.additions + self.deletions

    def commentable_lines(self, side: Side = "RIGHT") -> frozenset[int]:
        """Lines a review comment may sit on: new-side added+context (RIGHT), old-side removed+context (LEFT)."""
        if side == "RIGHT":
            return frozenset(ln.new_line for ln in self._lines("added", "context") if ln.new_line is not None)
        return frozenset(ln.old_line for ln in self._lines("removed", "context") if ln.old_line is not None)

    def _lines(self, *kinds: LineKind) -> list[DiffLine]:
        return [ln for hunk in self.hunks for ln in hunk.lines if ln.kind in kinds]


def parse_patch(
    path: str, patch: str | None, *, status: str = "modified", previous_path: str | None = None
) -> FileDiff:
    """Parse GitHub's per-file patch (hunks only, no file headers).

    A missing or blank patch gives an empty FileDiff: GitHub omits it for binary files, pure renames and
    mode changes, and the caller decides what that means. Anything else that is not a clean sequence of
    hunks raises PatchParseError rather than yielding a diff with lines silently missing, which would
    misplace comments.
    """
    if patch is None or not patch.strip():
        return FileDiff(path, (), status, previous_path, patch or "")
    text = patch.replace("\r\n", "\n")
    if not text.startswith("@@ "):
        raise PatchParseError(path, "it does not start with a hunk header")
    try:
        # A fixed name: the real path may hold tabs or newlines, which the header syntax cannot.
        patch_set = PatchSet.from_string(f"--- a/file\n+++ b/file\n{text}")
    except UnidiffParseError as exc:
        raise PatchParseError(path, str(exc)) from exc
    if len(patch_set) != 1:
        raise PatchParseError(path, "it holds more than one file")
    hunks = tuple(
        Hunk(
            h.source_start,
            h.source_length,
            h.target_start,
            h.target_length,
            h.section_header,
            tuple(_diff_line(ln) for ln in h if ln.line_type in _KINDS),
        )
        for h in patch_set[0]
    )
    # unidiff files every line it does not recognise as "patch info" instead of failing; count instead.
    parsed = sum(1 + len(h) for h in patch_set[0])
    if parsed != text.count("\n") + (0 if text.endswith("\n") else 1):
        raise PatchParseError(path, "it has lines outside any hunk")
    return FileDiff(path, hunks, status, previous_path, patch)


def _diff_line(line: Line) -> DiffLine:
    return DiffLine(_KINDS[line.line_type], line.source_line_no, line.target_line_no, line.value.rstrip("\r\n"))


def apply(diff: FileDiff, base_text: str) -> str | None:
    """The file at the head, from its text at the base and its hunks; None when a hunk's context or removed lines are
    not the base's (the patch is not of this text). Line ends of added lines are plain newlines."""
    base = base_text.split("\n")
    out: list[str] = []
    at = 0
    for hunk in diff.hunks:
        start = hunk.old_start if hunk.old_length == 0 else hunk.old_start - 1  # an insertion follows old_start
        if start < at or start > len(base):
            return None
        out.extend(base[at:start])
        at = start
        for line in hunk.lines:
            if line.kind == "added":
                out.append(line.text)
                continue
            if at >= len(base) or base[at].rstrip("\r") != line.text:
                return None
            if line.kind == "context":
                out.append(base[at])
            at += 1
    out.extend(base[at:])
    return "\n".join(out)
