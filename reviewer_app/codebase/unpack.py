"""Unpacking a repository's archive defensively: regular files and directories only, every path checked to stay in
the tree, sizes and counts bounded as the stream is read (a gzip bomb stops at the limit), nothing made executable,
and each file's git blob SHA taken as it is written."""

from __future__ import annotations

import gzip
import hashlib
import os
import tarfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import IO

from reviewer_app.codebase.settings import UnpackLimits

CHUNK = 256 * 1024
BINARY_PROBE = 8192  # a NUL byte in a file's first bytes marks it binary, as git does


class ArchiveRefused(ValueError):
    """The archive is not one the app unpacks (a path out of the tree, over a limit, not a gzipped tar)."""


@dataclass(frozen=True)
class Entry:
    """A file of the tree: its git blob SHA, its size, and whether it is text (binary files are kept unread)."""

    blob: str
    size: int
    text: bool


@dataclass
class Unpacked:
    """What was written, by path relative to the tree's root, and what was left out and why (counted)."""

    files: dict[str, Entry] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)  # reason: count

    def skip(self, reason: str) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + 1


def blob_sha(data: bytes) -> str:
    """Git's blob hash of ``data``: what the index is keyed by, and what GitHub names the blob."""
    return hashlib.sha1(b"blob %d\x00" % len(data) + data, usedforsecurity=False).hexdigest()


class _Bounded:
    """A read-only stream that refuses to yield more than ``limit`` bytes (the decompressed size of the archive)."""

    def __init__(self, raw: IO[bytes], limit: int) -> None:
        self.raw = raw
        self.limit = limit
        self.read_bytes = 0

    def read(self, size: int = -1) -> bytes:
        data = self.raw.read(size)
        self.read_bytes += len(data)
        if self.read_bytes > self.limit:
            raise ArchiveRefused(f"the archive unpacks to more than {self.limit:,} bytes")
        return data


def safe_relative(name: str) -> str:
    """The member's path inside the tree, its top folder (``owner-repo-sha7/``) dropped; ArchiveRefused for an
    absolute path, a ``..``, a control character or a backslash (no archive GitHub makes holds one)."""
    if not name or name.startswith("/") or "\\" in name or any(ord(c) < 32 or c == "\x7f" for c in name):
        raise ArchiveRefused(f"unsafe path in the archive: {name[:200]!r}")
    parts = [p for p in PurePosixPath(name).parts if p != "."]
    if ".." in parts or (parts and parts[0].endswith(":")):
        raise ArchiveRefused(f"unsafe path in the archive: {name[:200]!r}")
    return "/".join(parts[1:])


def unpack(archive: Path, dest: Path, limits: UnpackLimits) -> Unpacked:
    """Unpack the gzipped tarball ``archive`` into the new directory ``dest``; ArchiveRefused on anything unsafe or
    over a limit (``dest`` is then left for the caller to remove). Symlinks, hard links, devices and fifos are skipped,
    never created; a file over the size limit is skipped, not written."""
    if archive.stat().st_size > limits.max_archive_bytes:
        raise ArchiveRefused(f"the archive is larger than {limits.max_archive_bytes:,} bytes")
    dest.mkdir(parents=True, exist_ok=False)
    root = dest.resolve()
    out = Unpacked()
    total = members = 0
    # The decompressed stream may carry tar headers and padding beyond the files' sizes: allow for them.
    ceiling = limits.max_total_bytes + limits.max_members * 1024 + limits.max_file_bytes * 4
    with gzip.open(archive, "rb") as raw:
        stream = _Bounded(raw, ceiling)
        try:
            with tarfile.open(fileobj=stream, mode="r|") as tar:  # type: ignore[call-overload]
                for member in tar:
                    members += 1
                    if members > limits.max_members:
                        raise ArchiveRefused(f"the archive holds more than {limits.max_members:,} entries")
                    rel = safe_relative(member.name)
                    if not rel:
                        continue  # the top folder itself
                    if member.isdir():
                        _directory(root, rel)
                        continue
                    if member.issym() or member.islnk():
                        out.skip("link")  # never followed, never created
                        continue
                    if not member.isreg():
                        out.skip("special file")  # devices, fifos
                        continue
                    if member.size > limits.max_file_bytes:
                        out.skip("over the file size limit")
                        continue
                    if len(out.files) >= limits.max_files:
                        raise ArchiveRefused(f"the archive holds more than {limits.max_files:,} files")
                    total += member.size
                    if total > limits.max_total_bytes:
                        raise ArchiveRefused(f"the archive's files hold more than {limits.max_total_bytes:,} bytes")
                    tarfile.data_filter(member, str(root))  # the standard library's checks too
                    data = tar.extractfile(member)
                    if data is None:
                        out.skip("unreadable")
                        continue
                    entry = _write(root, rel, data, member.size)
                    if entry is None:
                        out.skip("path clash")
                    else:
                        out.files[rel] = entry
        except (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile) as exc:
            raise ArchiveRefused(f"not a readable gzipped tar archive: {exc}") from exc
    return out


def _directory(root: Path, rel: str) -> None:
    target = root / rel
    if target.exists() and not target.is_dir():
        return
    target.mkdir(parents=True, exist_ok=True)


def _write(root: Path, rel: str, data: IO[bytes], size: int) -> Entry | None:
    """Write one file (mode 0644, never over an existing one, never through a link); its entry, or None when its
    path clashes with what is there."""
    target = root / rel
    parent = target.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        return None
    if parent.resolve() != parent or not parent.is_relative_to(root):
        return None  # only real directories of the tree: no link was ever created, so this is belt and braces
    digest = hashlib.sha1(b"blob %d\x00" % size, usedforsecurity=False)
    written = 0
    head = b""
    try:
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    except (FileExistsError, IsADirectoryError, NotADirectoryError):
        return None
    with os.fdopen(fd, "wb") as f:
        while chunk := data.read(CHUNK):
            written += len(chunk)
            if written > size:
                raise ArchiveRefused(f"a member is longer than its header says: {rel[:200]!r}")
            if len(head) < BINARY_PROBE:
                head += chunk[: BINARY_PROBE - len(head)]
            digest.update(chunk)
            f.write(chunk)
    if written != size:
        raise ArchiveRefused(f"a member is shorter than its header says: {rel[:200]!r}")
    return Entry(digest.hexdigest(), size, b"\x00" not in head)
