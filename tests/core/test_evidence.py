"""The evidence check on crafted answers (core/evidence.py): a quote at its line keeps the finding where it is, a quote a
few lines away moves it there, a quote that is nowhere drops it, an older answer without quotes passes unchecked."""

from __future__ import annotations

import difflib
from dataclasses import replace

import pytest

from reviewer_app.core.diff import parse_patch
from reviewer_app.core.evidence import FileText, added_lines, base_lines, check_evidence, find_quote
from reviewer_app.core.review_model import ModelComment

BASE = [
    "def load(path):",
    "    f = open(path)",
    "    data = f.read()",
    "    return data",
    "",
    "def total(xs):",
    "    return sum(xs) / len(xs)",
    "",
]
HEAD = [
    "import json",
    "",
    "def load(path):",
    "    f = open(path)",
    "    data = json.loads(f.read())",
    "    return data",
    "",
    "def total(xs):",
    "    if not xs:",
    "        return 0",
    "    return sum(xs) / len(xs)",
    "",
]
PATH = "src/app.py"


def diff_of(old: list[str], new: list[str]):
    patch = "\n".join(list(difflib.unified_diff(old, new, lineterm="", n=3))[2:])
    return parse_patch(PATH, patch)


FILES = {PATH: FileText(HEAD, BASE)}


def finding(line: int, quote: str | None, side: str = "RIGHT", **kw: object) -> ModelComment:
    return ModelComment(PATH, line, "The file is never closed.", side=side, quote=quote, **kw)  # type: ignore[arg-type]


def test_a_quote_on_its_line_keeps_the_finding_as_it_is() -> None:
    comment = finding(4, "f = open(path)")
    result = check_evidence([comment], FILES)
    assert result.kept == (comment,) and result.invented == () and result.reanchored == 0


def test_a_multi_line_quote_covering_the_line_is_checked_whitespace_insensitively() -> None:
    comment = finding(5, "f  =  open(path)\n\tdata = json.loads(f.read())")
    assert check_evidence([comment], FILES).kept == (comment,)


def test_a_quote_a_few_lines_away_moves_the_finding_onto_its_last_line() -> None:
    comment = finding(8, "data = json.loads(f.read())")
    result = check_evidence([comment], FILES)
    [moved] = result.kept
    assert (moved.line, moved.side, result.reanchored) == (5, "RIGHT", 1)


def test_a_quote_nowhere_in_the_file_drops_the_finding_as_invented() -> None:
    comment = finding(4, "f = open(path, 'rb')  # binary")
    result = check_evidence([comment], FILES)
    assert result.kept == () and result.invented == (comment,)


def test_a_quote_too_short_to_prove_anything_is_invented() -> None:
    assert check_evidence([finding(4, " } ")], FILES).invented
    assert check_evidence([finding(4, "")], FILES).invented


def test_a_quote_far_away_moves_the_finding_onto_it() -> None:
    unique = finding(400, "if not xs:")
    [moved] = check_evidence([unique], FILES).kept
    assert moved.line == 9


def test_a_quote_found_twice_far_from_its_line_is_real_and_the_finding_moves_to_the_nearer_place() -> None:
    # It was dropped as invented: a quote in two places is no less in the file than one in one place.
    lines = ["x = compute()", *[f"y{i} = {i}" for i in range(40)], "x = compute()"]
    twice = ModelComment("b.py", 20, "Recomputed.", quote="x = compute()")
    result = check_evidence([twice], {"b.py": FileText(lines, lines)})
    assert result.invented == () and [c.line for c in result.kept] == [1]
    later = replace(twice, line=30)
    assert [c.line for c in check_evidence([later], {"b.py": FileText(lines, lines)}).kept] == [42]


def test_a_crlf_file_fits_its_diff_and_a_quote_of_removed_code_moves_to_the_base() -> None:
    # GitHub's patch carries no "\r"; the file read at the head keeps them: the base was not rebuilt, and a true
    # finding quoting removed code was dropped as invented.
    head = [f"{line}\r" for line in HEAD[:-1]] + [""]
    diff = diff_of(BASE, HEAD)
    assert base_lines(diff, head) == BASE
    quoting_removed = finding(5, "data = f.read()")
    result = check_evidence([quoting_removed], {PATH: FileText(head, base_lines(diff, head))})
    assert result.invented == () and [(c.side, c.line) for c in result.kept] == [("LEFT", 3)]


def test_a_left_comment_is_checked_against_the_base() -> None:
    left = finding(3, "data = f.read()", side="LEFT")
    assert check_evidence([left], FILES).kept == (left,)
    # The same quote on a RIGHT comment names code the change removed: the finding moves to that old line.
    [moved] = check_evidence([finding(3, "data = f.read()")], FILES).kept
    assert (moved.side, moved.line) == ("LEFT", 3)


def test_a_quote_copied_with_the_prompts_numbers_and_markers_is_found() -> None:
    numbered = "    4     4   f = open(path)\n          5 + data = json.loads(f.read())"
    assert check_evidence([finding(5, numbered)], FILES).kept[0].line == 5
    marked = "+    if not xs:\n+        return 0"
    assert check_evidence([finding(10, marked)], FILES).kept[0].line == 10


def test_an_elided_quote_matches_its_parts_in_order() -> None:
    assert find_quote("def total(xs):\n    ...\n    return sum(xs) / len(xs)", HEAD) == [(8, 11)]
    assert find_quote("return sum(xs) / len(xs)\n...\ndef total(xs):", HEAD) == []


def test_answers_without_quotes_and_unreadable_files_pass_unchecked() -> None:
    legacy = finding(4, None)
    elsewhere = ModelComment("unread.py", 3, "Hmm.", quote="anything at all")
    result = check_evidence([legacy, elsewhere], {**FILES, "unread.py": FileText(None, None)})
    assert result.kept == (legacy, elsewhere) and result.unchecked == 2


def test_a_moved_suggestion_keeps_its_range_only_when_it_replaces_the_quoted_lines() -> None:
    same_length = finding(11, "if not xs:\n    return 0", start_line=10, suggestion="if not xs:\n        return 0.0")
    [kept] = check_evidence([same_length], FILES).kept
    assert (kept.start_line, kept.line, kept.suggestion) == (9, 10, same_length.suggestion)
    other_length = finding(11, "if not xs:\n    return 0", suggestion="        return 0.0")
    [dropped] = check_evidence([other_length], FILES).kept
    assert (dropped.line, dropped.start_line, dropped.suggestion) == (10, None, None)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (BASE, HEAD),
        (HEAD, BASE),
        ([], HEAD),
        (BASE, [*BASE, "tail = 1"]),
        (["a"] * 30, ["a"] * 10 + ["b"] + ["a"] * 19),
    ],
)
def test_the_base_is_rebuilt_from_the_head_and_the_diff(old: list[str], new: list[str]) -> None:
    diff = diff_of(old, new)
    assert base_lines(diff, new) == old


def test_the_base_of_a_removed_or_added_file_and_a_head_that_does_not_fit() -> None:
    removed = diff_of(BASE, [])
    assert base_lines(parse_patch(PATH, removed.patch, status="removed"), None) == BASE
    assert base_lines(parse_patch(PATH, diff_of([], HEAD).patch, status="added"), HEAD) == []
    assert base_lines(diff_of(BASE, HEAD), HEAD[:3]) is None
    assert base_lines(None, HEAD) == HEAD  # a file the pull request does not change


def test_a_suggestion_whose_quote_holds_its_range_or_lies_within_it_stays() -> None:
    context = finding(10, "if not xs:\n    return 0", suggestion="        return 0.0")
    assert check_evidence([context], FILES).kept == (context,)
    inside = finding(11, "return 0", start_line=9, suggestion="if not xs:\n    return 0.0\nreturn 1")
    assert check_evidence([inside], FILES).kept == (inside,)


def test_an_added_files_diff_is_its_whole_head() -> None:
    added = parse_patch(PATH, diff_of([], HEAD).patch, status="added")
    assert added_lines(added) == HEAD
    assert added_lines(diff_of(BASE, HEAD)) is None and added_lines(None) is None
