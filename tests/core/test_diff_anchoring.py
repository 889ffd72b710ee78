"""Parsing GitHub's per-file patches, and anchoring model comments on commentable lines."""

from __future__ import annotations

import pytest

from reviewer_app.core.anchoring import anchor
from reviewer_app.core.diff import FileDiff, PatchParseError, parse_patch
from reviewer_app.core.markers import make_marker, parse_markers
from reviewer_app.core.review_model import InlineComment, ModelComment
from reviewer_app.review.render import inline_comment

# Old side: lines 20..23 (a, b, c, d). New side: lines 10..13 (a, B, c, e).
#   a  context  old 20 / new 10
#   b  removed  old 21
#   B  added            new 11
#   c  context  old 22 / new 12
#   d  removed  old 23
#   e  added            new 13
# Second hunk: old 40..41, new 30..32.
PATCH = "@@ -20,4 +10,4 @@ def first():\n a\n-b\n+B\n c\n-d\n+e\n@@ -40,2 +30,3 @@ def second():\n x\n+y\n z"


def test_parse_patch_collects_hunks_and_line_numbers() -> None:
    diff = parse_patch("src/app.py", PATCH)
    assert [h.header for h in diff.hunks] == ["@@ -20,4 +10,4 @@ def first():", "@@ -40,2 +30,3 @@ def second():"]
    assert diff.added_lines == {11, 13, 31}
    assert diff.removed_lines == {21, 23}
    assert (diff.additions, diff.deletions, diff.changes) == (3, 2, 5)


@pytest.mark.parametrize(
    ("side", "line", "commentable"),
    [
        ("RIGHT", 10, True),  # context line, new side
        ("RIGHT", 11, True),  # added line
        ("RIGHT", 12, True),  # context line
        ("RIGHT", 21, False),  # a removed line's old number is not a new-side line
        ("RIGHT", 14, False),  # between hunks
        ("RIGHT", 9, False),  # before the first hunk
        ("RIGHT", 33, False),  # after the last hunk
        ("LEFT", 21, True),  # removed line, old side
        ("LEFT", 22, True),  # context line, old side
        ("LEFT", 11, False),  # an added line's new number is not an old-side line
        ("LEFT", 41, True),
        ("LEFT", 42, False),
    ],
)
def test_commentable_lines(side: str, line: int, commentable: bool) -> None:
    diff = parse_patch("src/app.py", PATCH)
    assert (line in diff.commentable_lines(side)) is commentable  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("patch", "added", "right"),
    [
        # The marker inside a hunk, after the old last line and before the new one.
        ("@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+b\n\\ No newline at end of file", {2}, {1, 2}),
        # The marker after the hunk is complete.
        ("@@ -1 +1,2 @@\n a\n+b\n\\ No newline at end of file", {2}, {1, 2}),
        # A new file.
        ("@@ -0,0 +1,3 @@\n+one\n+two\n+three\n", {1, 2, 3}, {1, 2, 3}),
        # Windows line endings in the patch itself.
        ("@@ -1,2 +1,2 @@\r\n a\r\n-b\r\n+c\r\n", {2}, {1, 2}),
        # Content that looks like file headers inside a hunk is still content.
        ("@@ -1,2 +1,2 @@\n--- old header\n+++ new header\n x", {1}, {1, 2}),
        # An empty context line whose leading space was trimmed.
        ("@@ -1,3 +1,3 @@\n a\n\n-b\n+c", {3}, {1, 2, 3}),
    ],
)
def test_parse_patch_edge_cases(patch: str, added: set[int], right: set[int]) -> None:
    diff = parse_patch("f.txt", patch)
    assert diff.added_lines == added
    assert diff.commentable_lines("RIGHT") == right


@pytest.mark.parametrize("patch", [None, "", "   \n"])
def test_missing_or_blank_patch_gives_an_empty_diff(patch: str | None) -> None:
    diff = parse_patch("logo.png", patch, status="added")
    assert diff == FileDiff("logo.png", (), "added", None, patch or "")
    assert diff.commentable_lines("RIGHT") == frozenset()


@pytest.mark.parametrize(
    "patch",
    [
        "this is not a diff",
        "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b",  # file headers are not part of GitHub's patch
        "@@ -1,3 +1,3 @@\n a\n-b\n+c",  # hunk shorter than its header says
        "@@ -1 +1 @@\n-a\n+b\n+c",  # hunk longer than its header says
        "@@ -1 +1 @@\n-a\n+b\ntrailing garbage",  # lines outside any hunk
        "@@ -1 +1 @@\n-a\n+b\ndiff --git a/y b/y\n",  # a second file
        "\\ No newline at end of file",
    ],
)
def test_garbage_raises_patch_parse_error(patch: str) -> None:
    with pytest.raises(PatchParseError, match="cannot parse the patch of weird.py"):
        parse_patch("weird.py", patch)


def test_diff_keeps_githubs_patch_text() -> None:
    assert parse_patch("src/app.py", PATCH).patch == PATCH


def test_path_with_odd_characters_is_kept_verbatim() -> None:
    diff = parse_patch("dir/with space\tand tab.py", "@@ -1 +1 @@\n-a\n+b")
    assert diff.path == "dir/with space\tand tab.py"
    assert diff.added_lines == {1}


DIFFS = {"src/app.py": parse_patch("src/app.py", PATCH)}


@pytest.mark.parametrize(
    ("comment", "inline"),
    [
        (ModelComment("src/app.py", 11, "added line"), True),
        (ModelComment("src/app.py", 12, "context line"), True),
        (ModelComment("src/app.py", 21, "removed line's number on the right"), False),
        (ModelComment("src/app.py", 21, "removed line on the left", side="LEFT"), True),
        (ModelComment("src/app.py", 22, "context line by its old number", side="LEFT"), True),
        (ModelComment("src/app.py", 10, "a new-side number on the left", side="LEFT"), False),
        (ModelComment("src/app.py", 14, "between hunks"), False),
        (ModelComment("src/app.py", 500, "past the end"), False),
        (ModelComment("src/app.py", 0, "line zero"), False),
        (ModelComment("src/other.py", 11, "file not in the diff"), False),
        (ModelComment("./src/app.py", 11, "path with ./"), True),
        (ModelComment("b/src/app.py", 11, "path with b/"), True),
    ],
)
def test_anchor_inline_or_moved(comment: ModelComment, inline: bool) -> None:
    result = anchor([comment], DIFFS)
    assert (len(result.inline), len(result.moved)) == ((1, 0) if inline else (0, 1))
    if inline:
        assert result.inline[0] == InlineComment("src/app.py", comment.line, comment.body, comment.side)
    else:
        assert result.moved[0].body == comment.body


def test_anchor_deduplicates_identical_comments() -> None:
    comments = [
        ModelComment("src/app.py", 11, "Same  point"),
        ModelComment("src/app.py", 11, "Same point\n"),
        ModelComment("src/app.py", 11, "Different point"),
        ModelComment("src/gone.py", 1, "moved"),
        ModelComment("src/gone.py", 1, "moved"),
    ]
    result = anchor(comments, DIFFS)
    assert [c.body for c in result.inline] == ["Same  point", "Different point"]
    assert [c.body for c in result.moved] == ["moved"]


def test_anchor_drops_blank_comments() -> None:
    assert anchor([ModelComment("src/app.py", 11, "  \n ")], DIFFS) == anchor([], DIFFS)


def test_anchor_caps_inline_comments_and_moves_the_rest_in_order() -> None:
    comments = [ModelComment("src/app.py", line, f"c{line}") for line in (10, 11, 12, 13)]
    result = anchor(comments, DIFFS, max_inline=2)
    assert [c.line for c in result.inline] == [10, 11]
    assert [c.line for c in result.moved] == [12, 13]


def test_anchor_neutralises_inline_bodies() -> None:
    injected = make_marker(99, "b" * 40)
    body = f"Ask @alice about this. {injected} " + "x" * 200
    result = anchor([ModelComment("src/app.py", 11, body)], DIFFS, max_body_chars=100)
    text = result.inline[0].body
    assert "@alice" not in text and "@\u200balice" in text
    assert parse_markers(text) == []
    assert len(text) <= 100


def test_inline_comment_payload_for_github_carries_its_severity() -> None:
    result = anchor(
        [
            ModelComment("src/app.py", 13, "Off by one.", severity="critical"),
            ModelComment("src/app.py", 21, "Removed check.", side="LEFT"),
        ],
        DIFFS,
    )
    assert [inline_comment(c) for c in result.inline] == [
        {"path": "src/app.py", "line": 13, "side": "RIGHT", "body": "**🔴 Critical**\n\nOff by one."},
        {"path": "src/app.py", "line": 21, "side": "LEFT", "body": "**🟠 Warning**\n\nRemoved check."},
    ]


def test_a_suggestion_is_a_block_only_on_one_hunk_and_when_short_otherwise_plain_text() -> None:
    long = "x = 1\n" * 3000
    result = anchor(
        [
            ModelComment("src/app.py", 11, "Fix.", suggestion="new eleven"),
            ModelComment("src/app.py", 31, "Fix.", suggestion="y", start_line=12),
            ModelComment("src/app.py", 13, "Long.", suggestion=long),
        ],
        DIFFS,
    )
    first, across, too_long = (inline_comment(c) for c in result.inline)
    assert first["body"].endswith("```suggestion\nnew eleven\n```") and "start_line" not in first
    assert "```suggestion" not in across["body"] and across["body"].endswith("Suggested replacement:\n\n```\ny\n```")
    assert "```suggestion" not in too_long["body"] and too_long["body"].endswith("…(cut)\n```")
    assert len(too_long["body"]) < 4_200
