"""No mention survives neutralising, however it is spelled: GitHub finds mentions in the rendered text."""

from __future__ import annotations

import html
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reviewer_app.core.markers import safe_for_github
from reviewer_app.github.check_run_text import CheckView

ZWSP = "\u200b"
# What GitHub renders before it looks for mentions, roughly: entities decoded, emphasis, escapes, links and inline
# HTML gone. Dropping those characters only joins more text, so this finds every mention GitHub would, and more.
_MARKUP = re.compile(r"[*_~`\\\[\]()<>!|]")
_MENTION = re.compile(r"@[A-Za-z0-9]")
_AT_ENTITY = re.compile(r"&(?:#0*64(?![0-9])|#x0*40(?![0-9a-f])|commat)", re.IGNORECASE)


def pings(text: str) -> bool:
    rendered = _MARKUP.sub("", html.unescape(text))
    return bool(_MENTION.search(rendered))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # Emphasis around the mention: GitHub renders <em>@octocat</em>, whose text starts with "@".
        ("_@octocat_", f"_@{ZWSP}octocat_"),
        ("__@my-org/everyone__", f"__@{ZWSP}my-org/everyone__"),
        ("a*@octocat*", f"a*@{ZWSP}octocat*"),
        ("x**@my-org/everyone**", f"x**@{ZWSP}my-org/everyone**"),
        ("word_@octocat", f"word_@{ZWSP}octocat"),
        # Entity spellings of "@", any case, leading zeros, with or without ";".
        ("&#64;octocat", f"@{ZWSP}octocat"),
        ("&commat;octocat", f"@{ZWSP}octocat"),
        ("&COMMAT;octocat", f"@{ZWSP}octocat"),
        ("&Commat;octocat", f"@{ZWSP}octocat"),
        ("&#x40;octocat", f"@{ZWSP}octocat"),
        ("&#X40;octocat", f"@{ZWSP}octocat"),
        ("&#x0040;octocat", f"@{ZWSP}octocat"),
        ("&#00064;octocat", f"@{ZWSP}octocat"),
        ("&#64octocat", f"@{ZWSP}octocat"),
        ("_&#64;octocat_", f"_@{ZWSP}octocat_"),
        # What follows the "@" does not matter either.
        ("@&#111;ctocat", f"@{ZWSP}&#111;ctocat"),
        ("\\@octocat", f"\\@{ZWSP}octocat"),
        # Not an "@": left alone.
        ("&#640;x", "&#640;x"),
        ("&#x400;x", "&#x400;x"),
        ("&amp;#64;octocat", "&amp;#64;octocat"),
    ],
)
def test_every_spelling_of_a_mention_is_made_inert(text: str, expected: str) -> None:
    out = safe_for_github(text, 1000)
    assert out == expected and not pings(out)


def test_neutralising_twice_changes_nothing() -> None:
    once = safe_for_github("_@octocat_ &#64;x &commat;y z@w", 1000)
    assert safe_for_github(once, 1000) == once


# Text built from the pieces mentions are made of, and from anything at all.
_PIECES = st.sampled_from(
    [
        "@",
        "&#64;",
        "&#064;",
        "&#x40;",
        "&#X0040;",
        "&commat;",
        "&COMMAT;",
        "&#64",
        "&commat",
        "&",
        "#",
        ";",
        "64",
        "x40",
        "commat",
        "octocat",
        "my-org/everyone",
        "_",
        "__",
        "*",
        "**",
        "~",
        "\\",
        "`",
        "[",
        "](https://x)",
        "<b>",
        "</b>",
        "<",
        ">",
        " ",
        "\n",
        "a",
        "1",
        "-",
        "/",
        ".",
        ZWSP,
        "&amp;",
    ]
)
_TEXT = st.lists(st.one_of(_PIECES, st.text(max_size=5)), max_size=40).map("".join)
_FENCE_LINE = re.compile(r"^ {0,3}(?:`{3,}|~{3,})", re.MULTILINE)


@given(_TEXT)
def test_no_mention_or_at_entity_survives_outside_fences(text: str) -> None:
    # Fenced code is left as written (mentions do not ping there): keep fences out of the generated prose.
    text = _FENCE_LINE.sub("", text.replace("\r", ""))
    out = safe_for_github(text, 100_000)
    assert not pings(out), out
    assert not _AT_ENTITY.search(out), out
    assert all(out[i + 1 : i + 2] == ZWSP for i, c in enumerate(out) if c == "@"), out


@given(_TEXT, st.integers(min_value=1, max_value=200))
def test_no_mention_survives_truncation(text: str, limit: int) -> None:
    out = safe_for_github(_FENCE_LINE.sub("", text.replace("\r", "")), limit)
    assert len(out) <= limit and not pings(out), out


def test_check_run_summaries_are_neutralised_too() -> None:
    # A summary may quote an error, a login or .github/reviewer.yml; none of it can ping.
    view = CheckView("completed", "completed", "Review failed", "Problems: _@octocat_ &commat;my-org/everyone")
    summary = view.output()["summary"]
    assert not pings(summary) and summary.startswith("Problems: ")
