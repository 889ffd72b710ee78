"""Text made safe for a terminal (pure): what `reviewer-app review` prints comes from a pull request (file names,
titles) and from the model, and a terminal obeys what it is sent. Escape sequences (CSI, OSC hyperlinks and titles,
DCS and the other string controls, in their 7-bit and 8-bit forms) are removed whole, then every other control
character: C0 except newline and tab (a carriage return can overwrite a line), DEL, C1, and the bidirectional
overrides and isolates that make a line read otherwise than it is ("Trojan Source")."""

from __future__ import annotations

import re

_SEQUENCES = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]?"  # CSI: cursor moves, erase line/screen, colours
    r"|(?:\x1b[\]P^_X]|[\x9d\x90\x9e\x9f\x98])[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"  # OSC (hyperlinks), DCS, APC...
    r"|\x1b[ -/]*[0-~]?"  # every other escape: charset switches, keypad modes, a lone ESC
)
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def for_terminal(text: str) -> str:
    """``text`` with every escape sequence and control character removed, newlines and tabs kept."""
    return _CONTROLS.sub("", _SEQUENCES.sub("", text))
