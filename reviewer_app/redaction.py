"""Credentials out of URLs and connection strings before they are printed, logged or shown: one function for the app."""

from __future__ import annotations

import re

MASK = "***"

# "scheme://user:password@": the password runs to the last "@" of the URL, as a password with an unescaped "/"
# or "@" would still be a password to the person who typed it; masking a little too much is the safe mistake.
_USERINFO = re.compile(r"(?P<head>\b[A-Za-z][A-Za-z0-9+.\-]*://[^\s:/?#@'\"]*:)\S*@")
# password=... in a query string or a key=value connection string (quoted values may hold spaces).
_PARAM = re.compile(
    r"(?P<head>(?<![A-Za-z0-9_])(?:ssl)?(?:password|passwd|pwd|secret|client_secret|access_token|token|api_?key)"
    r"\s*=\s*)(?:'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|[^\s&;#'\"]+)",
    re.IGNORECASE,
)


def redact_url(text: str) -> str:
    """``text`` with the password of every URL in it, and every ``password=``-style parameter, masked.

    Works on anything: a DSN (``postgresql://user:secret@host/db?sslpassword=...``), a libpq key=value string, or
    a message that quotes one. The user name and host stay, so the message still says which server it meant.
    """
    text = _USERINFO.sub(lambda m: f"{m['head']}{MASK}@", text)
    return _PARAM.sub(lambda m: f"{m['head']}{MASK}", text)
