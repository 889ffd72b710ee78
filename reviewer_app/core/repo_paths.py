"""The one way a repository path (from a pull request: a file name, a finding's path, a thread's path) becomes part of
a GitHub URL. Pure: no I/O.

A path is data, never URL syntax. Each segment is percent-encoded whole (RFC 3986; ``%``, ``?``, ``#``, spaces and
every non-ASCII byte included), so ``%2e%2e/x?ref=main#`` names that file of this repository and cannot climb out of
``/repos/{owner}/{name}/contents/`` or change the ref. Segments that URL resolution would reinterpret (empty, ``.``,
``..``) have no encoding that survives it (``%2E`` *is* ``.`` to every URL parser), and git never stores them: such a
path is refused, and the caller reports the file as unreadable.
"""

from __future__ import annotations

from urllib.parse import quote


class UnsafePath(ValueError):
    """A path that cannot name a file of the repository in a URL."""


def url_path(path: str) -> str:
    """``path`` as an encoded URL path (segments joined by ``/``), ready for a URI template's ``{+path}``.

    Raises UnsafePath for an empty path, a NUL, or an empty, ``.`` or ``..`` segment.
    """
    if not path or "\x00" in path:
        raise UnsafePath(f"not a repository path: {path!r}")
    segments = path.split("/")
    if any(s in ("", ".", "..") for s in segments):
        raise UnsafePath(f"not a repository path (empty, '.' or '..' segment): {path!r}")
    return "/".join(quote(s, safe="", encoding="utf-8", errors="surrogateescape") for s in segments)
