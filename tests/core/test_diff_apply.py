"""The head of a file from its base text and GitHub's patch (core/diff.py's apply): hunks applied in order, an
insertion at the top, a deletion at the end; a patch that is not of this text gives None, never a guess."""

from __future__ import annotations

from reviewer_app.core.diff import apply, parse_patch

BASE = "one\ntwo\nthree\nfour\nfive\n"


def test_hunks_apply_in_order_and_keep_the_rest() -> None:
    patch = "@@ -1,2 +1,3 @@\n+zero\n one\n two\n@@ -4,2 +5,1 @@\n four\n-five\n"
    assert apply(parse_patch("f.txt", patch), BASE) == "zero\none\ntwo\nthree\nfour\n"


def test_an_insertion_into_an_empty_range_follows_its_line() -> None:
    patch = "@@ -2,0 +3,1 @@\n+two and a half\n"
    assert apply(parse_patch("f.txt", patch), BASE) == "one\ntwo\ntwo and a half\nthree\nfour\nfive\n"
    assert apply(parse_patch("f.txt", "@@ -0,0 +1,1 @@\n+top\n"), "") == "top\n"


def test_a_patch_of_other_text_gives_none() -> None:
    assert apply(parse_patch("f.txt", "@@ -2,1 +2,1 @@\n-TWO\n+2\n"), BASE) is None
    assert apply(parse_patch("f.txt", "@@ -9,1 +9,1 @@\n-x\n+y\n"), BASE) is None


def test_carriage_returns_of_the_base_are_kept_on_its_lines() -> None:
    patch = "@@ -1,2 +1,2 @@\n a\n-b\n+c\n"
    assert apply(parse_patch("f.txt", patch), "a\r\nb\r\n") == "a\r\nc\n"
