"""Credentials out of text before it is printed, logged or shown: passwords in URLs and connection strings (one
function for the app), and, for the log, the configured secrets and the values of known credential headers."""

from __future__ import annotations

import re
from collections.abc import Iterable

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


# Headers that carry a credential, whatever the request: their values never reach a log line. Matched as a header line
# ("Authorization: Bearer ..."), a canonical-request line botocore logs ("x-amz-security-token:..."), or a quoted
# mapping entry ("'x-api-key': '...'", "b'...'").
CREDENTIAL_HEADERS = (
    "authorization",
    "proxy-authorization",
    "x-amz-security-token",
    "x-amz-session-token",
    "x-api-key",
    "x-goog-api-key",
    "api-key",
    "private-token",
    "cookie",
    "set-cookie",
)
_HEADER_VALUE = re.compile(
    r"(?P<head>(?<![A-Za-z0-9-])(?P<q>['\"]?)(?:" + "|".join(map(re.escape, CREDENTIAL_HEADERS)) + r")(?P=q)\s*[:=]\s*)"
    r"(?:b?'(?:[^'\\]|\\.)*'|b?\"(?:[^\"\\]|\\.)*\"|[^\r\n]+)",
    re.IGNORECASE,
)
# Tokens by their documented prefixes (GitHub's, Anthropic's keys), minted or not: an installation token is never
# configured, yet must not be logged either.
_TOKEN_SHAPES = re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|sk-ant-[A-Za-z0-9_-]{8,})")
MIN_SECRET_CHARS = 6  # a shorter value ("on", "1") would mask half the log and hide nothing worth hiding


class Redactor:
    """Masks, in any text: each of ``secrets`` (and each long line of a multi-line one, a PEM key's), the values of
    CREDENTIAL_HEADERS, tokens of known shapes, and passwords in URLs (``redact_url``)."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        values: set[str] = set()
        for secret in secrets:
            values.add(secret.strip())
            values.update(line.strip() for line in secret.splitlines())
        kept = sorted((v for v in values if len(v) >= MIN_SECRET_CHARS), key=len, reverse=True)
        self._secrets = re.compile("|".join(map(re.escape, kept))) if kept else None

    def __call__(self, text: str) -> str:
        if self._secrets is not None:
            text = self._secrets.sub(MASK, text)
        text = _HEADER_VALUE.sub(lambda m: f"{m['head']}{MASK}", text)
        text = _TOKEN_SHAPES.sub(MASK, text)
        return redact_url(text)
