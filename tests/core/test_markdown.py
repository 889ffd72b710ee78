"""Untrusted Markdown made publishable: harmless HTML kept and balanced, other tags shown as text."""

from __future__ import annotations

import pytest

from reviewer_app.core.markdown import inline_text, publishable


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Use Optional<Path>.", "Use Optional&lt;Path>."),
        ("Use `Optional<Path>`.", "Use `Optional<Path>`."),
        ("H<sub>2</sub>O<br>", "H<sub>2</sub>O<br>"),
        (
            "<details>\n<summary>Why</summary>\ntext\n</details>",
            "<details>\n\n<summary>Why</summary>\n\ntext\n</details>",
        ),
        ("</details> closes ours", "&lt;/details> closes ours"),
        ("<details open>\nleft open", "<details open>\n\nleft open\n\n</details>"),
        ("<details onclick=x>", "&lt;details onclick=x>"),
        ("<script>alert(1)</script>", "&lt;script>alert(1)&lt;/script>"),
        ("```\n<b>in code</b>\n```", "```\n<b>in code</b>\n```"),
        ("a <sub>open", "a <sub>open\n\n</sub>"),
    ],
)
def test_publishable(text: str, expected: str) -> None:
    assert publishable(text, 1000) == expected


def test_publishable_stays_within_its_limit() -> None:
    assert len(publishable("<x>" * 500, 300)) <= 300


def test_inline_text_is_one_short_line_and_closes_a_cut_code_span() -> None:
    out = inline_text("First `some <code> that runs` long\n<b>x</b> @dave", 20)
    assert "\n" not in out and out.endswith("`…") and out.count("`") == 2
    assert inline_text("<b>x</b> @dave", 50) == "&lt;b>x&lt;/b> @\u200bdave"
