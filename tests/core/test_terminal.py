"""What a terminal is sent carries no escape sequence and no control character but newline and tab
(core/terminal.py), one row per trick."""

from __future__ import annotations

import pytest

from reviewer_app.core.terminal import for_terminal


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("\x1b]8;;https://evil.example/\x1b\\src/a.py\x1b]8;;\x1b\\", "src/a.py"),  # OSC 8 hyperlink, ST-terminated
        ("\x1b]8;;https://evil.example/\x07a.py\x1b]8;;\x07", "a.py"),  # BEL-terminated
        ("\x9d8;;https://evil.example/\x9ca.py", "a.py"),  # 8-bit OSC and ST
        ("done\x1b[2K\x1b[1Aall good", "doneall good"),  # erase line, cursor up
        ("\x1b[31;1mred\x1b[0m", "red"),
        ("\x9b2J\x9b31mcleared", "cleared"),  # 8-bit CSI
        ("\x1b]0;a window title\x07text", "text"),
        ("\x1bPq#0;2;0;0;0\x1b\\text", "text"),  # DCS (sixel)
        ("\x1b(0x\x1b(B", "x"),  # charset switch
        ("\x1bcreset", "reset"),  # a two-character escape (RIS)
        ("over\rwrite\x08\x07\x00\x7f", "overwrite"),
        ("next\x85line\x84 \x8d\x9f", "nextline "),  # C1 controls, NEL among them
        ("keep\ttabs\nand lines é — ✓", "keep\ttabs\nand lines é — ✓"),
        ("a lone ESC at the end\x1b", "a lone ESC at the end"),
        ("\x1b]8;;unterminated", ""),
    ],
)
def test_for_terminal(text: str, shown: str) -> None:
    assert for_terminal(text) == shown
