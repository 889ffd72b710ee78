"""The on-disk cache of base trees, one folder per repository: the manifest of a base commit's archive (path -> blob
SHA, size, text or not), the store of its files and their tags by blob SHA (index.py), and a small record of when it
was fetched and last used. When to fetch again is a pure decision; the least recently used repositories go first when
the cache is over its size."""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from reviewer_app.codebase.settings import CodebaseSettings
from reviewer_app.codebase.unpack import Entry

log = logging.getLogger(__name__)

META = "meta.json"
STORE = "index.sqlite"


@dataclass
class Meta:
    """What the cache knows of a repository's base tree."""

    base_sha: str
    fetched_at: float
    used_at: float
    tree: str  # the manifest's file name, under the repository's folder
    bytes: int = 0  # the tree's files
    moves: list[str] = field(default_factory=list)  # base heads seen since the fetch (how far the base moved on)
    refused: str = ""  # why the archive was refused (too large, unsafe): remembered until a fetch is due again


def needs_fetch(meta: Meta | None, base_sha: str, now: float, settings: CodebaseSettings) -> bool:
    """Fetch the base's archive again: none cached, or the base moved on by more than the settings' time or number
    of heads since the cached one (a review of an older base overlays its changes on a newer tree, and the other way
    round: the changed files are always the head's; only files the pull request does not touch may be off)."""
    if meta is None:
        return True
    if meta.base_sha == base_sha:
        return False
    moved = len({*meta.moves, base_sha})
    return now - meta.fetched_at > settings.refresh_seconds or moved >= settings.refresh_commits


def repo_folder(cache_dir: Path, repo: str) -> Path:
    """The repository's folder: its name from ``owner/name`` (GitHub's characters only), never a path out."""
    safe = "".join(c if c.isalnum() or c in "-_.+" else "_" for c in repo.replace("/", "+"))
    return cache_dir / safe.lstrip(".")


def read_meta(folder: Path) -> Meta | None:
    try:
        raw = json.loads((folder / META).read_text())
        return Meta(**raw)
    except (OSError, ValueError, TypeError):
        return None


def write_meta(folder: Path, meta: Meta) -> None:
    _atomic_write(folder / META, json.dumps(asdict(meta)))


def read_manifest(folder: Path, meta: Meta) -> dict[str, Entry] | None:
    try:
        raw = json.loads((folder / meta.tree).read_text())
        return {p: Entry(blob, size, text) for p, (blob, size, text) in raw.items()}
    except (OSError, ValueError, TypeError):
        return None


def write_manifest(path: Path, files: dict[str, Entry]) -> None:
    _atomic_write(path, json.dumps({p: [e.blob, e.size, e.text] for p, e in files.items()}))


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def prune_manifests(folder: Path, keep: str) -> None:
    """Remove the repository's other manifests and unfinished downloads."""
    for child in folder.iterdir():
        if child.name != keep and child.name.startswith(("base-", ".download-")):
            child.unlink(missing_ok=True)


def folder_bytes(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.iterdir() if f.is_file())


def evict(cache_dir: Path, limit: int, *, keep: Path) -> list[str]:
    """Remove whole repositories, least recently used first, until the cache holds at most ``limit`` bytes (their
    files, tags and manifests); never ``keep``. The names removed."""
    folders: list[tuple[float, int, Path]] = []
    for folder in cache_dir.iterdir() if cache_dir.is_dir() else ():
        if not folder.is_dir():
            continue
        meta = read_meta(folder)
        folders.append((meta.used_at if meta else 0.0, folder_bytes(folder), folder))
    total = sum(size for _, size, _ in folders)
    removed: list[str] = []
    for _, size, folder in sorted(folders, key=lambda f: f[0]):
        if total <= limit:
            break
        if folder == keep:
            continue
        shutil.rmtree(folder, ignore_errors=True)
        total -= size
        removed.append(folder.name)
    if removed:
        log.info("codebase cache over %d bytes: removed %s", limit, ", ".join(removed))
    return removed


def touch(folder: Path, meta: Meta, *, now: float | None = None) -> None:
    meta.used_at = time.time() if now is None else now
    write_meta(folder, meta)
