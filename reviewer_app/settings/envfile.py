"""The .env file: KEY=VALUE lines read into the environment at start, updated atomically with mode 0600."""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Mapping, MutableMapping
from pathlib import Path

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PLAIN = re.compile(r"[A-Za-z0-9_./:@+,=-]*")
_ESCAPES = {"n": "\n", "r": "\r", "t": "\t", '"': '"', "\\": "\\", "$": "$"}


class EnvFileError(ValueError):
    """The .env file cannot be read or parsed; the message is one line naming the file and the line."""


def parse_env(text: str, *, source: str = ".env") -> dict[str, str]:
    """``KEY=VALUE`` lines: blank lines and ``#`` comments are skipped, ``export`` is allowed, values may be
    unquoted (a `` #`` starts a comment), 'single-quoted' (literal) or "double-quoted" (with \\n, \\" and \\\\)."""
    values: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("export "):
            line = line[len("export ") :].lstrip()
        name, sep, rest = line.partition("=")
        name = name.strip()
        if not sep or not _NAME.fullmatch(name):
            raise EnvFileError(f"{source}, line {number}: expected NAME=value")
        try:
            values[name] = _value(rest.strip())
        except ValueError as exc:
            raise EnvFileError(f"{source}, line {number}: {exc}") from None
    return values


def _value(rest: str) -> str:
    if rest.startswith("'"):
        end = rest.find("'", 1)
        if end < 0:
            raise ValueError("unterminated single quote")
        _only_comment_after(rest[end + 1 :])
        return rest[1:end]
    if rest.startswith('"'):
        out: list[str] = []
        i = 1
        while i < len(rest):
            ch = rest[i]
            if ch == "\\" and i + 1 < len(rest):
                nxt = rest[i + 1]
                out.append(_ESCAPES.get(nxt, "\\" + nxt))
                i += 2
                continue
            if ch == '"':
                _only_comment_after(rest[i + 1 :])
                return "".join(out)
            out.append(ch)
            i += 1
        raise ValueError("unterminated double quote")
    comment = re.search(r"\s#", rest)
    return (rest[: comment.start()] if comment else rest).strip()


def _only_comment_after(tail: str) -> None:
    tail = tail.strip()
    if tail and not tail.startswith("#"):
        raise ValueError("text after the closing quote")


def read_env_file(path: str | os.PathLike[str]) -> dict[str, str]:
    """The file's values; a missing file is empty."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise EnvFileError(f"{path}: cannot read ({reason})") from None
    return parse_env(text, source=str(path))


def apply_env_file(path: str | os.PathLike[str], environ: MutableMapping[str, str]) -> list[str]:
    """Copy the file's values into ``environ`` where the environment does not set them (empty counts as unset).

    The real environment wins, so an operator can override one value without editing the file. Returns the
    names that were set.
    """
    applied = []
    for name, value in read_env_file(path).items():
        if not environ.get(name):
            environ[name] = value
            applied.append(name)
    return applied


def format_value(value: str) -> str:
    """A value as a .env line writes it: bare when plain, else double-quoted with escapes (one line always)."""
    if _PLAIN.fullmatch(value):
        return value
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$")
    return '"' + escaped.replace("\r", "\\r").replace("\n", "\\n") + '"'


def update_env_file(path: str | os.PathLike[str], values: Mapping[str, str]) -> None:
    """Set ``values`` in the file, keeping its other lines: written to a new file created with mode 0600, synced,
    then renamed over the old one, so a crash leaves the old file or the new one, never half of either."""
    target = Path(path)
    try:
        old_lines = target.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        old_lines = []
    kept = [line for line in old_lines if _line_name(line) not in values]
    lines = kept + [f"{name}={format_value(value)}" for name, value in values.items()]
    parent = target.parent if str(target.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(dir=parent, prefix=f".{target.name}.", suffix=".tmp")  # created 0600
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write("\n".join(lines) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    dir_fd = os.open(parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)  # the rename itself survives a crash
    finally:
        os.close(dir_fd)


def writable_problem(path: str | os.PathLike[str]) -> str | None:
    """Why the file could not be written now, or None; checked before anything is registered on GitHub."""
    target = Path(path)
    parent = target.parent if str(target.parent) else Path(".")
    if target.is_dir():
        return f"{target} is a directory"
    if not parent.is_dir():
        return f"the directory {parent} does not exist"
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"the directory {parent} is not writable by this process"
    return None


def _line_name(line: str) -> str | None:
    stripped = line.strip()
    if stripped.startswith("export "):
        stripped = stripped[len("export ") :].lstrip()
    name = stripped.partition("=")[0].strip()
    return name if "=" in stripped and _NAME.fullmatch(name) else None
