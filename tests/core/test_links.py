"""Model text published without the review's checks (answers): only the repository's own GitHub host is linked or
loaded, and no suggestion block is committable (reviewer_app/core/links.py)."""

from __future__ import annotations

import cmarkgfm
import pytest

from reviewer_app.core.links import confine_links, plain_suggestions

HOST = "github.com"


def rendered(text: str) -> str:
    return cmarkgfm.github_flavored_markdown_to_html(text)


@pytest.mark.parametrize(
    "text",
    [
        "[click](https://evil.example/a)",
        "![x](https://track.example/p.gif)",
        "[click](http://github.com/o/r)",  # not https
        "[click](https://github.com.evil.example/o/r)",
        "<https://evil.example/a>",
        "see https://evil.example/a now",
        "see www.evil.example now",
        "[click][r]\n\n[r]: https://evil.example/a",
        '[click](https://evil.example/a "title")',
        "[![x](https://track.example/p.gif)](https://evil.example)",
    ],
)
def test_no_outside_address_renders_as_a_link_or_an_image(text: str) -> None:
    html = rendered(confine_links(text, HOST))
    assert "<a " not in html and "<img" not in html, html
    assert any(host in html for host in ("evil.example", "track.example", "http://github.com"))  # shown, as text


def test_links_to_the_repositorys_host_and_code_are_left_alone() -> None:
    text = (
        "[a.py](https://github.com/o/r/blob/main/a.py) and `https://evil.example` and\n```\nhttps://evil.example\n```"
    )
    assert confine_links(text, HOST) == text
    ghes = "[a.py](https://ghe.example.com/o/r)"
    assert confine_links(ghes, "ghe.example.com") == ghes


def test_suggestion_blocks_become_plain_code_and_other_fences_stay() -> None:
    text = "```suggestion\nx = 1\n```\n\n~~~~ Suggestion extra\ny\n~~~~\n\n```python\n```suggestion\n```"
    out = plain_suggestions(text)
    assert out == "```\nx = 1\n```\n\n~~~~\ny\n~~~~\n\n```python\n```suggestion\n```"


def test_a_writes_rendered_text_is_confined_and_nothing_else_is_touched() -> None:
    from reviewer_app.core.links import carries_text, confine_write

    evil = "![x](https://evil.example/p.png)"
    data = {
        "commit_id": "a" * 40,
        "body": f"summary {evil}",
        "event": "COMMENT",
        "comments": [{"path": "https://evil.example/p.png", "line": 3, "body": evil}],
        "output": {"title": evil, "summary": evil, "text": evil},
    }
    out = confine_write(data, HOST)
    shown = "x (`https://evil.example/p.png`)"
    assert out["body"] == f"summary {shown}" and out["comments"][0]["body"] == shown
    assert (out["output"]["summary"], out["output"]["text"]) == (shown, shown)
    # Not rendered by GitHub: a path, a title, the commit, kept as they are; the caller's data is not changed.
    assert out["comments"][0]["path"] == data["comments"][0]["path"] and out["output"]["title"] == evil
    assert out["commit_id"] == data["commit_id"] and data["body"] == f"summary {evil}"
    assert carries_text(data) and carries_text({"output": {}}) and not carries_text({"content": "+1"})
    assert not carries_text(None) and not carries_text({"body": None})
