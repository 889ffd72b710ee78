"""A file's bytes as the review reads them (pure): text when they are UTF-8 with no NUL byte, not text otherwise. A
replacement character written into a UTF-8 file (a test of an encoding, a changelog that quotes one) is text: only
bytes that do not decode make a file not text, never a character they decode to."""

from __future__ import annotations

NOT_TEXT = "\x00"  # what a reader hands on for a file that is not text: readers refuse any text holding a NUL


def decode(data: bytes) -> str | None:
    """The text of ``data``; None when it is not text (a NUL byte, or bytes that are not UTF-8)."""
    if b"\x00" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def as_read(data: bytes) -> str:
    """``data`` as a reader hands it on: its text, or NOT_TEXT."""
    text = decode(data)
    return NOT_TEXT if text is None else text
