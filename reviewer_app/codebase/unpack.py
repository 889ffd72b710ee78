"""Unpacking a repository's archive defensively: regular files only (links, devices and fifos skipped, never
followed), every path checked to stay in the tree (an absolute path or a ``..`` refuses the archive), sizes and counts
bounded as the stream is read (a gzip bomb stops at the limit), and each file's git blob SHA taken. The files go to a
content store by blob SHA (index.py), never to paths on the disk, and nothing is ever executed."""

from __future__ import annotations

import gzip
import hashlib
import tarfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import IO

from reviewer_app.codebase.settings import UnpackLimits

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


def unpack(archive: Path, limits: UnpackLimits, keep: Callable[[str, Entry, bytes], None]) -> Unpacked:
    """Read the gzipped tarball ``archive``, handing each regular file to ``keep`` (its path in the tree, its entry,
    its bytes); ArchiveRefused on anything unsafe or over a limit. Nothing is written to the disk here, so no path of
    the archive ever names a file of ours; symlinks, hard links, devices and fifos are skipped (never followed), a file
    over the size limit is skipped unread."""
    if archive.stat().st_size > limits.max_archive_bytes:
        raise ArchiveRefused(f"the archive is larger than {limits.max_archive_bytes:,} bytes")
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
                    if not rel or member.isdir():
                        continue  # the top folder, and folders: the files' paths name them
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
                    if rel in out.files:
                        out.skip("path clash")
                        continue
                    data = _read(tar, member, rel)
                    entry = Entry(blob_sha(data), len(data), b"\x00" not in data[:BINARY_PROBE])
                    keep(rel, entry, data)
                    out.files[rel] = entry
        except (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile) as exc:
            raise ArchiveRefused(f"not a readable gzipped tar archive: {exc}") from exc
    return out


def _read(tar: tarfile.TarFile, member: tarfile.TarInfo, rel: str) -> bytes:
    source = tar.extractfile(member)
    data = source.read(member.size + 1) if source is not None else b""
    if len(data) != member.size:
        raise ArchiveRefused(f"a member's length is not what its header says: {rel[:200]!r}")
    return data
