"""Every line number we show or anchor on is the line's true number on its side (split on `\\n` only, as GitHub).

Real diffs: the project's own git history (every file of the newest commits, checked against both blobs). Generated
diffs: `git diff --no-index` over texts with form feeds, vertical tabs, U+2028/2029, lone `\\r`, CRLF and no final
newline, the characters `str.splitlines()` also breaks on.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reviewer_app.core.diff import FileDiff, parse_patch
from reviewer_app.review.prompt import annotate_diff
from tests.fakes.github import commentable_lines, pull_file

ROOT = Path(__file__).resolve().parents[2]
HISTORY_COMMITS = 40
MAX_BLOB_BYTES = 200_000
_ANNOTATED = re.compile(r"^(?P<old>[ \d]{5}) (?P<new>[ \d]{5}) (?P<mark>[-+ ]) (?P<text>.*)$", re.S)

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


@dataclass(frozen=True)
class Case:
    path: str
    patch: str  # as GitHub sends it: hunks only
    old: str
    new: str


def check(case: Case) -> None:
    """Parsed lines, annotated lines and the fake GitHub's commentable lines all agree with the two texts."""
    old_lines, new_lines = case.old.split("\n"), case.new.split("\n")
    diff = parse_patch(case.path, case.patch)
    for hunk in diff.hunks:
        for ln in hunk.lines:
            if ln.old_line is not None:
                assert _same(old_lines[ln.old_line - 1], ln.text), (case.path, ln)
            if ln.new_line is not None:
                assert _same(new_lines[ln.new_line - 1], ln.text), (case.path, ln)
    _check_annotated(diff, old_lines, new_lines)
    left, right = commentable_lines(case.patch)
    assert right == set(diff.commentable_lines("RIGHT")) and left == set(diff.commentable_lines("LEFT"))
    entry = pull_file(case.path, case.patch)
    assert (entry["additions"], entry["deletions"]) == (diff.additions, diff.deletions)


def _check_annotated(diff: FileDiff, old_lines: list[str], new_lines: list[str]) -> None:
    shown = [ln for ln in annotate_diff(diff).split("\n") if not ln.startswith("@@")]
    expected = [ln for hunk in diff.hunks for ln in hunk.lines]
    assert len(shown) == len(expected), "the annotation split a line (or joined two)"
    for row, ln in zip(shown, expected, strict=True):
        match = _ANNOTATED.match(row)
        assert match, row
        old, new = match["old"].strip(), match["new"].strip()
        if old:
            assert _same(old_lines[int(old) - 1], match["text"]), row
        if new:
            assert _same(new_lines[int(new) - 1], match["text"]), row
        assert (old or None, new or None) == (
            None if ln.old_line is None else str(ln.old_line),
            None if ln.new_line is None else str(ln.new_line),
        )


def _same(truth: str, shown: str) -> bool:
    # A CRLF file's lines end in "\r"; the parsed text drops the line ending, nothing else.
    return truth.rstrip("\r") == shown.rstrip("\r")


def github_patch(git_diff: str) -> str:
    """The per-file patch GitHub's API sends: the diff from its first hunk header, without a trailing newline."""
    start = git_diff.find("\n@@ ") + 1
    return git_diff[start:].removesuffix("\n") if start else ""


# ---------------------------------------------------------------------------------------------- generated edge cases

# The characters str.splitlines() treats as line breaks besides "\n", plus ordinary text.
_BREAKERS = ["\f", "\v", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029", "\r"]
_line = st.lists(st.sampled_from(["a", "b", "x = 1", "  ", "\t", "é", *_BREAKERS]), max_size=4).map("".join)
_text = st.tuples(
    st.lists(_line, min_size=0, max_size=25),
    st.booleans(),  # CRLF endings
    st.booleans(),  # final newline
).map(lambda t: ("\r\n" if t[1] else "\n").join(t[0]) + (("\r\n" if t[1] else "\n") if t[2] and t[0] else ""))


def _mutate(text: str, data: st.DataObject) -> str:
    lines = text.split("\n")
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(lines)))
        action = data.draw(st.sampled_from(["insert", "delete", "replace"]))
        new = data.draw(_line)
        if action == "insert" or not lines or i == len(lines):
            lines.insert(i, new)
        elif action == "delete":
            del lines[i]
        else:
            lines[i] = new
    return "\n".join(lines)


def git_diff_no_index(tmp: Path, old: str, new: str, context: int) -> str:
    a, b = tmp / "a.txt", tmp / "b.txt"
    a.write_bytes(old.encode())
    b.write_bytes(new.encode())
    out = subprocess.run(
        ["git", "diff", "--no-index", "--no-color", f"-U{context}", "--", str(a), str(b)],
        capture_output=True,
        check=False,
    )
    assert out.returncode in (0, 1), out.stderr
    return out.stdout.decode()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(old=_text, data=st.data(), context=st.integers(0, 3))
def test_numbers_hold_on_generated_diffs(tmp_path: Path, old: str, data: st.DataObject, context: int) -> None:
    new = _mutate(old, data)
    patch = github_patch(git_diff_no_index(tmp_path, old, new, context))
    if not patch:
        return  # identical texts: no hunks
    check(Case("gen.txt", patch, old, new))


def test_a_form_feed_does_not_shift_the_numbers_below_it() -> None:
    """The issue's case: one form feed above the change numbered line 42 as 43."""
    old = "\n".join([f"line {i}" for i in range(1, 41)] + ["\f", "target", "end"])
    new = old.replace("target", "target changed")
    patch = "@@ -40,4 +40,4 @@\n line 40\n \f\n-target\n+target changed\n end"
    check(Case("gnu.c", patch, old, new))
    annotated = annotate_diff(parse_patch("gnu.c", patch)).split("\n")
    assert annotated[4].split() == ["42", "+", "target", "changed"]


# ---------------------------------------------------------------------------------------------- the project's history


def _history_cases() -> Iterator[Case]:
    try:
        log = subprocess.run(
            [
                "git",
                "-C",
                str(ROOT),
                "log",
                "-p",
                "--full-index",
                "--no-renames",
                "--no-color",
                "--format=commit %H",
                f"-n{HISTORY_COMMITS}",
            ],
            capture_output=True,
            check=True,
        ).stdout.decode("utf-8", errors="surrogateescape")
    except (subprocess.CalledProcessError, FileNotFoundError):
        return
    files: list[tuple[str, str, str, str]] = []  # path, old blob, new blob, git diff text
    for chunk in re.split(r"^diff --git ", log, flags=re.M)[1:]:
        head = re.search(r"^index ([0-9a-f]{40})\.\.([0-9a-f]{40})", chunk, flags=re.M)
        path = re.search(r"^\+\+\+ b/(.*)$", chunk, flags=re.M) or re.search(r"^--- a/(.*)$", chunk, flags=re.M)
        if head is None or path is None or "\n@@ " not in chunk:
            continue  # binary, mode-only or empty
        body = chunk.split("\ncommit ", 1)[0]  # the last file of a commit runs into the next commit line
        files.append((path[1], head[1], head[2], body))
    blobs = _read_blobs({sha for _, old, new, _ in files for sha in (old, new)})
    for path, old, new, body in files:
        if old in blobs and new in blobs:
            yield Case(path, github_patch(body), blobs[old], blobs[new])


def _read_blobs(shas: set[str]) -> dict[str, str]:
    """Blob texts by sha (the zero sha is the empty side of an added or deleted file)."""
    zero = "0" * 40
    wanted = sorted(shas - {zero})
    proc = subprocess.run(
        ["git", "-C", str(ROOT), "cat-file", "--batch"],
        input="\n".join(wanted).encode() + b"\n",
        capture_output=True,
        check=True,
    )
    out, blobs, pos = proc.stdout, {zero: ""}, 0
    for sha in wanted:
        header_end = out.index(b"\n", pos)
        parts = out[pos:header_end].split()
        pos = header_end + 1
        if len(parts) < 3:  # "<sha> missing" in a shallow clone
            continue
        size = int(parts[2])
        data = out[pos : pos + size]
        pos += size + 1
        if size <= MAX_BLOB_BYTES:
            blobs[sha] = data.decode("utf-8", errors="surrogateescape")
    return blobs


def test_numbers_hold_on_the_projects_own_history() -> None:
    cases = list(_history_cases())
    if not cases:
        pytest.skip("no git history in this checkout")
    for case in cases:
        check(case)
    assert len(cases) > 20
