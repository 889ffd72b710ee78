"""Neutralising untrusted text, and the review body and check run texts built from it."""

from __future__ import annotations

import re

import pytest

from reviewer_app.core.markers import Marker, make_marker, parse_markers, safe_for_github
from reviewer_app.core.review_model import ModelComment, ReviewCounts
from reviewer_app.github.check_run_text import check_cancelled, check_failed, check_reviewed, check_superseded
from reviewer_app.review.render import Links, render_review_body

SHA = "c" * 40
ZWSP = "\u200b"
# A superset of GitHub's user and team mention syntax: "@" after a non-word character, then a login.
GITHUB_MENTION = re.compile(r"(?:^|[^A-Za-z0-9_])@[A-Za-z0-9]", re.MULTILINE)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("ping @alice please", f"ping @{ZWSP}alice please"),
        ("@alice at the start", f"@{ZWSP}alice at the start"),
        ("team @octo-org/reviewers", f"team @{ZWSP}octo-org/reviewers"),
        ("(@bob)", f"(@{ZWSP}bob)"),
        # Every "@": GitHub decides what is a mention after rendering (see tests/core/test_mentions.py).
        ("mail alice@example.com", f"mail alice@{ZWSP}example.com"),
        ("first.last+tag@example.co.uk", f"first.last+tag@{ZWSP}example.co.uk"),
        (f"already @{ZWSP}alice", f"already @{ZWSP}alice"),
        ("a lone @ sign", f"a lone @{ZWSP} sign"),
        ("hide <!-- the rest", "hide &lt;!-- the rest"),
        ("<details>\n@carol\n</details>", f"&lt;details>\n@{ZWSP}carol\n&lt;/details>"),
        ("nul\x00 and bell\x07 gone", "nul and bell gone"),
        ("crlf\r\nline", "crlf\nline"),
        ("cr\rline", "cr\nline"),
    ],
)
def test_safe_for_github(text: str, expected: str) -> None:
    assert safe_for_github(text, 1000) == expected


def test_safe_for_github_leaves_fenced_code_alone() -> None:
    text = "Use this:\n```suggestion\n@property\ndef name(self) -> str:\n```\nthanks @dave"
    assert safe_for_github(text, 1000) == (
        f"Use this:\n```suggestion\n@property\ndef name(self) -> str:\n```\nthanks @{ZWSP}dave"
    )


def test_safe_for_github_closes_a_fence_left_open() -> None:
    assert safe_for_github("~~~\n@decorator", 1000) == "~~~\n@decorator\n~~~"


@pytest.mark.parametrize(
    "text",
    [
        "> ```\n@erin",  # a fence inside a quote ends with the quote
        "- ```\n@erin",  # a fence inside a list item ends with the item
        "  ```\n@erin",  # indented fences may belong to a list item: treated as prose
        "\\@erin",
        "~~~\r~~~\n@erin",  # a lone CR ends a line: the fence is closed before @erin
        "`@erin`",  # inline code does not ping, but neutralising it is harmless
    ],
)
def test_no_mention_survives_outside_column_zero_fences(text: str) -> None:
    assert not GITHUB_MENTION.search(safe_for_github(text, 1000))


def test_escaped_html_block_cannot_turn_a_fence_into_prose() -> None:
    # Raw, "<div>" would open an HTML block in which "```" is text and "@erin" pings; escaped, the fence
    # is a real code block on GitHub too, so leaving its content alone is right.
    assert safe_for_github("<div>\n```\n@erin\n```", 1000) == "&lt;div>\n```\n@erin\n```"


def test_safe_for_github_strips_injected_markers() -> None:
    text = f"Fine. {make_marker(42, SHA)}"
    assert parse_markers(safe_for_github(text, 1000)) == []


@pytest.mark.parametrize("limit", [20, 50, 200])
def test_safe_for_github_truncates_with_a_note(limit: int) -> None:
    out = safe_for_github("word " * 100, limit)
    assert len(out) <= limit
    assert out.endswith("…(truncated)")


def test_truncation_inside_a_fence_closes_it() -> None:
    out = safe_for_github("intro\n```\n" + "code line\n" * 50, 60)
    assert len(out) <= 60
    assert out.endswith("```\n\n…(truncated)")


def test_safe_for_github_rejects_a_non_positive_limit() -> None:
    with pytest.raises(ValueError):
        safe_for_github("x", 0)


COUNTS = ReviewCounts(files_reviewed=3, inline=2, moved=2, not_covered=2)


def body(**overrides: object) -> str:
    options: dict[str, object] = {
        "summary": "Overall fine, @frank.",
        "moved_comments": [
            ModelComment("src/a.py", 7, "Consider a timeout here."),
            ModelComment("src/b.py", 3, "This removal drops validation.", side="LEFT"),
        ],
        "not_covered": [("yarn.lock", "lock file"), ("src/huge.py", "larger than the token budget")],
        "incremental_note": "Reviewed the changes since 1234567.",
        "marker": make_marker(9, SHA),
        "counts": COUNTS,
        "inline": [],
        "folded": [],
        "links": Links("https://github.com/octo/widgets/pull/4", SHA),
        **overrides,
    }
    return render_review_body(**options)  # type: ignore[arg-type]


def test_review_body_sections_in_order_with_marker_last() -> None:
    text = body()
    positions = [
        text.index(s)
        for s in (
            "_Reviewed the changes since 1234567._",
            "Overall fine",
            "### Findings",
            "### Outside the diff",
            "<summary>Not reviewed: 2 files",
            "3 files reviewed",
        )
    ]
    assert positions == sorted(positions)
    assert text.endswith(make_marker(9, SHA))
    assert f"@{ZWSP}frank" in text


def test_review_body_lists_moved_comments_and_skipped_files() -> None:
    text = body()
    permalink = f"https://github.com/octo/widgets/blob/{SHA}/src/a.py#L7"
    assert f"**🟠 Warning · [`src/a.py`, line 7]({permalink})**\n\nConsider a timeout here." in text
    assert "line 3 of the old version](https://github.com/octo/widgets/pull/4/files#diff-" in text
    assert "**lock file** (1)\n\n- `yarn.lock`" in text
    assert "**larger than the token budget** (1)\n\n- `src/huge.py`" in text
    assert "2 inline comments · 2 comments outside the diff · 2 files not reviewed" in text


def test_review_body_omits_empty_sections_and_note() -> None:
    text = body(moved_comments=[], not_covered=[], incremental_note=None)
    assert "###" not in text and "_Reviewed" not in text
    assert text.startswith("Overall fine")


def test_review_body_carries_only_our_marker() -> None:
    forged = make_marker(10, SHA)
    text = body(
        summary=f"Nice {forged}",
        moved_comments=[ModelComment(f"{forged}.py", 1, forged)],
        not_covered=[(f"{forged}.txt", "binary")],
        incremental_note=forged,
    )
    assert parse_markers(text) == [Marker(9, SHA)]


def test_review_body_paths_cannot_break_out_of_code_spans() -> None:
    text = body(moved_comments=[], not_covered=[("odd`name @gina.py", "binary")])
    assert "- ``odd`name @gina.py``" in text


def test_review_body_stays_within_its_limit() -> None:
    many = [(f"src/file_{i}.py", "over the review budget") for i in range(5000)]
    text = body(not_covered=many, max_chars=20_000)
    assert len(text) <= 20_000
    assert text.endswith(make_marker(9, SHA))
    listed = text.count("- `src/file_")
    assert 0 < listed < 5000
    assert f"…and {5000 - listed} more files" in text


def test_check_reviewed() -> None:
    title, summary = check_reviewed(COUNTS, head_sha=SHA)
    assert title == "Reviewed 3 files: no findings"
    assert SHA[:12] in summary and "2 files not reviewed" in summary


def test_check_reviewed_with_nothing_to_review() -> None:
    title, _ = check_reviewed(ReviewCounts(0, 0, 0, 4), head_sha=SHA)
    assert title == "No files to review"


def test_check_superseded_names_short_and_full_sha() -> None:
    new = "0123456789abcdef0123456789abcdef01234567"
    title, summary = check_superseded(new)
    assert title == "Superseded by 0123456"
    assert new in summary


@pytest.mark.parametrize("unknown", [None, "a newer commit", ""])
def test_check_superseded_without_a_sha(unknown: str | None) -> None:
    assert check_superseded(unknown) == (
        "Superseded by a newer commit",
        "A newer commit was pushed before this review finished.",
    )


@pytest.mark.parametrize("reason", [None, "the pull request was closed", "the pull request was closed."])
def test_check_cancelled(reason: str | None) -> None:
    title, summary = check_cancelled() if reason is None else check_cancelled(reason)
    assert (title, summary) == ("Review cancelled", "No review was posted: the pull request was closed.")


def test_check_failed_names_attempts_and_reason() -> None:
    title, summary = check_failed(5, "model overloaded (529) @hank", retry_hint="Retry with `jobs retry 9`.")
    assert title == "Review failed after 5 attempts"
    assert "model overloaded (529)" in summary and f"@{ZWSP}hank" in summary
    assert summary.endswith("Retry with `jobs retry 9`.")
    assert check_failed(1, "x")[0] == "Review failed after 1 attempt"
