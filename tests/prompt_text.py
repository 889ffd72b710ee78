"""Reading the prompt the fake Anthropic received: the user turn's text, the file list, the files shown."""

from __future__ import annotations

from typing import Any

from tests.fakes.anthropic import RecordedRequest


def user_text(req: RecordedRequest, index: int = 0) -> str:
    """The text of the ``index``-th message, its content blocks joined."""
    content: Any = req.messages[index]["content"]
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content if isinstance(b, dict))


def between(text: str, start: str, end: str) -> str:
    return text.split(start, 1)[1].split(end, 1)[0] if start in text else ""


def changed_files(req: RecordedRequest) -> str:
    """The <changed_files> list of the first user turn."""
    return between(user_text(req), "<changed_files", "</changed_files>")


def files_shown(req: RecordedRequest) -> str:
    """The <files> block of the first user turn: the diffs the model was shown."""
    return between(user_text(req), "<files>", "</files>")
