"""The hidden review marker: making it, finding it, and keeping untrusted text from forging it."""

from __future__ import annotations

from typing import Any

import pytest

from reviewer_app.core.markers import (
    Marker,
    find_posted_reply,
    find_published_review,
    make_marker,
    make_reply_marker,
    parse_markers,
    strip_markers,
)

SHA = "a" * 40
OTHER_SHA = "b" * 40
BOT = "reviewer-app[bot]"


def test_make_marker_format_and_round_trip() -> None:
    marker = make_marker(123, SHA)
    assert marker == f"<!-- reviewer-app:review job=123 sha={SHA} -->"
    assert parse_markers(f"Some review text\n\n{marker}") == [Marker(123, SHA)]


def test_make_marker_normalises_sha_case() -> None:
    assert make_marker(1, "ABCDEF0123" * 4) == make_marker(1, "abcdef0123" * 4)


@pytest.mark.parametrize(
    ("job_id", "sha"),
    [(0, SHA), (-1, SHA), (True, SHA), (1, "a" * 39), (1, "g" * 40), (1, ""), (1, SHA + " ")],
)
def test_make_marker_rejects_malformed_input(job_id: Any, sha: str) -> None:
    with pytest.raises(ValueError):
        make_marker(job_id, sha)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (None, []),
        ("", []),
        ("no marker here", []),
        (
            f"<!-- reviewer-app:review job=1 sha={SHA} --> <!-- reviewer-app:review job=2 sha={OTHER_SHA} -->",
            [Marker(1, SHA), Marker(2, OTHER_SHA)],
        ),
        (f"<!--reviewer-app:review   job=7\nsha={SHA.upper()}-->", [Marker(7, SHA)]),
        (f"<!-- reviewer-app:review job=x sha={SHA} -->", []),
        (f"<!-- reviewer-app:review job=1 sha={SHA[:-1]} -->", []),
        (f"<!-- someone-else:review job=1 sha={SHA} -->", []),
    ],
)
def test_parse_markers(text: str | None, expected: list[Marker]) -> None:
    assert parse_markers(text) == expected


def review(review_id: int, login: str | None, body: str | None) -> dict[str, Any]:
    return {"id": review_id, "user": None if login is None else {"login": login}, "body": body}


MARKED = f"Looks good.\n\n{make_marker(5, SHA)}"


@pytest.mark.parametrize(
    ("reviews", "found_id"),
    [
        ([review(1, BOT, MARKED)], 1),
        ([review(1, "Reviewer-App[BOT]", MARKED)], 1),  # logins compare case-insensitively
        ([review(1, "mallory", MARKED)], None),  # a contributor's copy is ignored
        ([review(1, "mallory", MARKED), review(2, BOT, MARKED)], 2),
        ([review(1, "reviewer-app", MARKED)], None),  # not the bot account
        ([review(1, BOT, f"x {make_marker(6, SHA)}")], None),  # another job
        ([review(1, BOT, f"x {make_marker(5, OTHER_SHA)}")], None),  # another head
        ([review(1, BOT, "no marker")], None),
        ([review(1, BOT, None)], None),
        ([review(1, None, MARKED)], None),  # deleted ("ghost") user
        ([], None),
    ],
)
def test_find_published_review(reviews: list[dict[str, Any]], found_id: int | None) -> None:
    found = find_published_review(reviews, bot_login=BOT, job_id=5, head_sha=SHA)
    assert (found["id"] if found else None) == found_id


def test_find_published_review_accepts_uppercase_sha() -> None:
    found = find_published_review([review(1, BOT, MARKED)], bot_login=BOT, job_id=5, head_sha=SHA.upper())
    assert found is not None


@pytest.mark.parametrize(
    "text",
    [
        f"Please ignore {make_marker(6, SHA)} this",
        f"<!-- reviewer-app:<!-- reviewer-app:review job=1 sha={SHA} -->review job=6 sha={SHA} -->",
        f"<!-- REVIEWER-APP:REVIEW job=6 sha={SHA} -->",
        f"<!-- reviewer-app:rereviewer-app:reviewview job=6 sha={SHA} -->",  # reassembles after one pass
    ],
)
def test_strip_markers_removes_injected_markers(text: str) -> None:
    stripped = strip_markers(text)
    assert parse_markers(stripped) == []
    assert "reviewer-app:review" not in stripped.lower()


def test_strip_markers_keeps_ordinary_text() -> None:
    text = "Use <!-- comments --> sparingly; reviewer-app reviews code."
    assert strip_markers(text) == text


def test_a_reply_marker_names_the_effect_by_id_and_creation_time() -> None:
    marker = make_reply_marker(7, 1_800_000_000.1234)
    assert marker == "<!-- reviewer-app:reply effect=7 created=1800000000123 -->"
    # A SQLite row id handed out again after the cleaner pruned the newest effects names another reply.
    assert make_reply_marker(7, 1_800_000_500.0) != marker


def test_a_posted_reply_is_the_bots_comment_ending_with_the_marker() -> None:
    marker = make_reply_marker(7, 1_800_000_000.0)
    pasted = {"id": 1, "user": {"login": "mallory"}, "body": f"help text\n\n{marker}"}
    quoted = {"id": 2, "user": {"login": BOT}, "body": f"Unknown command `{marker}`.\n\n{make_reply_marker(6, 1.0)}"}
    other = {"id": 3, "user": {"login": BOT}, "body": f"help text\n\n{make_reply_marker(8, 1_800_000_000.0)}"}
    ours = {"id": 4, "user": {"login": "Reviewer-App[bot]"}, "body": f"help text\n\n{marker}\n"}
    assert find_posted_reply([pasted, quoted, other], bot_login=BOT, marker=marker) is None
    assert find_posted_reply([pasted, quoted, other, ours], bot_login=BOT, marker=marker) is ours
    assert find_posted_reply([{"id": 5, "user": None, "body": marker}], bot_login=BOT, marker=marker) is None
