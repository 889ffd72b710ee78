"""Unpacking refuses crafted archives: paths out of the tree, absolute paths, links (never created, never followed),
devices, too many files, too much data (a gzip bomb stops at the limit without inflating it all), and a huge file is
skipped unread; a GitHub-shaped archive unpacks with git's blob SHAs, and nothing is written to the disk by path."""

from __future__ import annotations

import gzip
import io
import os
import tarfile
import time
from pathlib import Path

import pytest

from reviewer_app.codebase.settings import UnpackLimits
from reviewer_app.codebase.unpack import ArchiveRefused, Entry, Unpacked, blob_sha
from reviewer_app.codebase.unpack import unpack as unpack_into

TOP = "octo-org-widgets-abc1234"


def _archive(tmp_path: Path, members: list[tarfile.TarInfo | tuple[tarfile.TarInfo, bytes]], name: str = "a") -> Path:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", format=tarfile.PAX_FORMAT) as tar:
        for m in members:
            if isinstance(m, tuple):
                tar.addfile(m[0], io.BytesIO(m[1]))
            else:
                tar.addfile(m)
    path = tmp_path / f"{name}.tar.gz"
    path.write_bytes(buffer.getvalue())
    return path


class Kept(dict[str, bytes]):
    """What unpacking handed over, by path."""

    def __call__(self, path: str, entry: Entry, data: bytes) -> None:
        assert entry.blob == blob_sha(data) and entry.size == len(data)
        self[path] = data


def unpack(archive: Path, dest: Path, limits: UnpackLimits) -> Unpacked:
    """Unpack, then check that nothing appeared on the disk next to the archive (or anywhere under its folder)."""
    before = sorted(archive.parent.rglob("*"))
    kept = Kept()
    try:
        out = unpack_into(archive, limits, kept)
    finally:
        assert sorted(archive.parent.rglob("*")) == before
        assert not (archive.parent.parent / "escape.txt").exists()
    assert set(kept) == set(out.files)
    dest.mkdir(parents=True)  # the tests read what was kept from here
    for path, data in kept.items():
        (dest / path).parent.mkdir(parents=True, exist_ok=True)
        (dest / path).write_bytes(data)
    return out


def _file(name: str, data: bytes, mode: int = 0o644) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.size, info.mode = len(data), mode
    return info, data


def _special(name: str, kind: bytes, **attrs: object) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    for k, v in attrs.items():
        setattr(info, k, v)
    return info


def test_a_github_shaped_archive_unpacks_with_blob_shas(tmp_path: Path) -> None:
    top = _special(TOP, tarfile.DIRTYPE, mode=0o775)
    archive = _archive(
        tmp_path,
        [top, _file(f"{TOP}/src/app.py", b"print(1)\n", 0o755), _file(f"{TOP}/logo.png", b"\x89PNG\x00\x01")],
    )
    out = unpack(archive, tmp_path / "tree", UnpackLimits())
    assert set(out.files) == {"src/app.py", "logo.png"}
    assert out.files["src/app.py"].blob == blob_sha(b"print(1)\n")
    assert blob_sha(b"hello\n") == "ce013625030ba8dba906f756967f9e9ca394464a"  # `git hash-object` of "hello\n"
    assert out.files["src/app.py"].text and not out.files["logo.png"].text


@pytest.mark.parametrize(
    "name",
    [f"{TOP}/../../escape.txt", "/etc/cron.d/evil", f"{TOP}/src/../../../escape.txt", f"{TOP}\\..\\x", "../x"],
)
def test_paths_out_of_the_tree_are_refused(tmp_path: Path, name: str) -> None:
    archive = _archive(tmp_path, [_file(f"{TOP}/ok.py", b"x = 1\n"), _file(name, b"owned\n")])
    with pytest.raises(ArchiveRefused, match="unsafe path"):
        unpack(archive, tmp_path / "out" / "tree", UnpackLimits())
    assert not (tmp_path / "escape.txt").exists() and not (tmp_path / "out" / "escape.txt").exists()


def test_links_are_never_created_nor_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("secret\n")
    archive = _archive(
        tmp_path,
        [
            _special(f"{TOP}/link", tarfile.SYMTYPE, linkname=str(outside)),
            _special(f"{TOP}/up", tarfile.SYMTYPE, linkname="../../.."),
            _special(f"{TOP}/hard", tarfile.LNKTYPE, linkname="/etc/passwd"),
            # A file written "through" the link the archive tried to make: it must land nowhere but the tree.
            _file(f"{TOP}/up/escaped.txt", b"owned\n"),
            _file(f"{TOP}/link", b"overwrite\n"),
        ],
    )
    out = unpack(archive, tmp_path / "tree", UnpackLimits())
    assert out.skipped["link"] == 3
    assert outside.read_text() == "secret\n"
    # The file "behind" the link the archive tried to make is a plain file of the tree, and so is "link".
    assert set(out.files) == {"up/escaped.txt", "link"}
    assert (tmp_path / "tree" / "link").read_text() == "overwrite\n"
    assert not (tmp_path.parent / "escaped.txt").exists()


def test_devices_and_fifos_are_skipped(tmp_path: Path) -> None:
    archive = _archive(
        tmp_path,
        [
            _special(f"{TOP}/dev", tarfile.CHRTYPE, devmajor=1, devminor=3),
            _special(f"{TOP}/blk", tarfile.BLKTYPE, devmajor=8, devminor=0),
            _special(f"{TOP}/fifo", tarfile.FIFOTYPE),
            _file(f"{TOP}/ok.py", b"x = 1\n"),
        ],
    )
    out = unpack(archive, tmp_path / "tree", UnpackLimits())
    assert out.skipped["special file"] == 3 and set(out.files) == {"ok.py"}
    assert sorted(p.name for p in (tmp_path / "tree").iterdir()) == ["ok.py"]


def test_a_file_over_the_size_limit_is_skipped_not_written(tmp_path: Path) -> None:
    archive = _archive(tmp_path, [_file(f"{TOP}/big.bin", b"a" * 5000), _file(f"{TOP}/ok.py", b"x = 1\n")])
    out = unpack(archive, tmp_path / "tree", UnpackLimits(max_file_bytes=4096))
    assert out.skipped["over the file size limit"] == 1
    assert set(out.files) == {"ok.py"}


def test_too_many_files_are_refused(tmp_path: Path) -> None:
    archive = _archive(tmp_path, [_file(f"{TOP}/f{i}.py", b"x\n") for i in range(11)])
    with pytest.raises(ArchiveRefused, match="more than 10 files"):
        unpack(archive, tmp_path / "tree", UnpackLimits(max_files=10))


def test_too_many_entries_of_any_kind_are_refused(tmp_path: Path) -> None:
    archive = _archive(tmp_path, [_special(f"{TOP}/d{i}", tarfile.DIRTYPE) for i in range(30)])
    with pytest.raises(ArchiveRefused, match="more than 20 entries"):
        unpack(archive, tmp_path / "tree", UnpackLimits(max_members=20))


def test_too_much_data_in_all_is_refused(tmp_path: Path) -> None:
    archive = _archive(tmp_path, [_file(f"{TOP}/f{i}.py", b"x" * 3000) for i in range(5)])
    with pytest.raises(ArchiveRefused, match="more than 10,000 bytes"):
        unpack(archive, tmp_path / "tree", UnpackLimits(max_total_bytes=10_000))


def test_a_gzip_bomb_stops_at_the_limit_without_inflating_it_all(tmp_path: Path) -> None:
    # 256 MB of zeros declared as one member: about 256 KB compressed. The file size limit skips the member, but skipping
    # it still means inflating it; the stream's own bound stops that at the limit.
    path = tmp_path / "bomb.tar.gz"
    size = 256 * 1024**2
    info = tarfile.TarInfo(f"{TOP}/zeros")
    info.size = size
    with gzip.open(path, "wb", compresslevel=9) as gz:
        gz.write(info.tobuf(format=tarfile.PAX_FORMAT))
        chunk = bytes(1024 * 1024)
        for _ in range(size // len(chunk)):
            gz.write(chunk)
    assert path.stat().st_size < 1024 * 1024
    limits = UnpackLimits(max_total_bytes=2 * 1024 * 1024, max_file_bytes=1024 * 1024, max_members=100)
    started = time.monotonic()
    with pytest.raises(ArchiveRefused, match="unpacks to more than"):
        unpack(path, tmp_path / "tree", limits)
    assert time.monotonic() - started < 5  # it stopped after a few MB, not after 256 MB


def test_an_archive_over_the_download_limit_or_not_a_tarball_is_refused(tmp_path: Path) -> None:
    archive = _archive(tmp_path, [_file(f"{TOP}/ok.py", b"x = 1\n" * 100)])
    with pytest.raises(ArchiveRefused, match="larger than"):
        unpack(archive, tmp_path / "t1", UnpackLimits(max_archive_bytes=10))
    junk = tmp_path / "junk.tar.gz"
    junk.write_bytes(os.urandom(2000))
    with pytest.raises(ArchiveRefused, match="not a readable"):
        unpack(junk, tmp_path / "t2", UnpackLimits())
