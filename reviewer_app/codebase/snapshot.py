"""The repository at a pull request's head: the cached base tree (fetched as one archive when missing or too old)
overlaid with the changed files the review read, and its index brought up to date; the ``Codebase`` the review
stages use. Slow work (download, unpack, parse) runs off the event loop; anything going wrong gives None, and the
review goes on without it."""

from __future__ import annotations

import asyncio
import logging
import secrets
import sqlite3
import time
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import cachetools

from reviewer_app.codebase import ArchiveSource, ChangedText, Snippet
from reviewer_app.codebase.cache import (
    STORE,
    Meta,
    evict,
    needs_fetch,
    prune_manifests,
    read_manifest,
    read_meta,
    repo_folder,
    touch,
    write_manifest,
    write_meta,
)
from reviewer_app.codebase.index import CodeIndex, TagStore, bring_up_to_date
from reviewer_app.codebase.settings import CodebaseSettings
from reviewer_app.codebase.unpack import ArchiveRefused, Entry, Unpacked, blob_sha, unpack
from reviewer_app.core.diff import apply
from reviewer_app.core.errors import ArchiveTooLarge, JobError

log = logging.getLogger(__name__)

TEXT_CACHE_BYTES = 16 * 1024 * 1024
# One fetch of a repository at a time in this process. A lock belongs to the event loop it was first awaited on, so
# the locks are kept per loop (a process that runs a second loop, as tests and the CLI do, gets locks of its own);
# a loop's locks go with it.
_locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, asyncio.Lock]] = weakref.WeakKeyDictionary()


def _fetch_lock(repo: str) -> asyncio.Lock:
    return _locks.setdefault(asyncio.get_running_loop(), {}).setdefault(repo, asyncio.Lock())


@dataclass(frozen=True)
class FileAt:
    """A file of the head tree: its blob SHA and size, whether it is text, and its text when the pull request
    changed it (the rest is read from the base tree)."""

    blob: str
    size: int
    text: bool
    changed: str | None = None


class Snapshot:
    """The ``Codebase`` of one review: files by path, the base tree on disk, the index."""

    def __init__(
        self,
        repo: str,
        head_sha: str,
        store: TagStore,
        files: dict[str, FileAt],
        index: CodeIndex,
        settings: CodebaseSettings,
        *,
        parsed: int = 0,
    ) -> None:
        self.repo = repo
        self.head_sha = head_sha
        self.store = store
        self.files = files
        self.index = index
        self.settings = settings
        self.parsed = parsed  # files parsed to bring the index to this head (the rest came from the store)
        self.timings: dict[str, float] = {}  # seconds: the base tree (fetched and unpacked, or cached), the index
        self._texts: cachetools.LRUCache[str, str | None] = cachetools.LRUCache(
            maxsize=TEXT_CACHE_BYTES, getsizeof=lambda t: len(t or "") + 1
        )
        self._dirs: dict[str, set[str]] | None = None

    # ------------------------------------------------------------------------------------ reading

    def text(self, path: str) -> str | None:
        """A text file's content at the head; None when there is no such file or it is not text."""
        found = self.files.get(path)
        if found is None or not found.text:
            return None
        if found.changed is not None:
            return found.changed
        if path in self._texts:
            return self._texts[path]
        data = self.store.content(found.blob)  # None: pruned under us by a newer base's fetch (only an optimisation)
        text = data.decode("utf-8", errors="replace") if data is not None else None
        self._texts[path] = text
        return text

    def directories(self) -> dict[str, set[str]]:
        if self._dirs is None:
            dirs: dict[str, set[str]] = {"": set()}
            for path in self.files:
                parts = path.split("/")
                for depth in range(len(parts)):
                    parent = "/".join(parts[:depth])
                    child = parts[depth] + ("/" if depth < len(parts) - 1 else "")
                    dirs.setdefault(parent, set()).add(child)
            self._dirs = dirs
        return self._dirs

    # ------------------------------------------------------------------------------------ the interface

    def related(self, path: str, start: int, end: int, *, budget_tokens: int) -> tuple[list[Snippet], int]:
        from reviewer_app.codebase.related import related

        return related(self, path, start, end, budget_tokens=budget_tokens)

    def search_code(self, pattern: str, *, regex: bool = False, path_glob: str | None = None, limit: int = 50) -> str:
        from reviewer_app.codebase.search import search_code

        return search_code(self, pattern, regex=regex, path_glob=path_glob, limit=limit)

    def find_definition(self, name: str, *, limit: int = 10, bodies: int = 0) -> str:
        from reviewer_app.codebase.search import find_definition

        return find_definition(self, name, limit=limit, bodies=bodies)

    def find_references(self, name: str, *, limit: int = 50) -> str:
        from reviewer_app.codebase.search import find_references

        return find_references(self, name, limit=limit)

    def read_file(self, path: str, start: int = 1, end: int | None = None) -> str | None:
        from reviewer_app.codebase.search import read_file

        return read_file(self, path, start, end)

    def list_directory(self, path: str) -> list[str]:
        return sorted(self.directories().get(path.strip("/"), set()))


def overlay(base: Mapping[str, Entry], changed: Mapping[str, ChangedText]) -> dict[str, FileAt]:
    """The head tree: the base's files, the changed ones replaced by their head text, removed and renamed-away ones
    gone (a changed file the review could not read as text is left out rather than shown as the base had it)."""
    files = {p: FileAt(e.blob, e.size, e.text) for p, e in base.items()}
    for change in changed.values():
        if change.previous_path and change.previous_path != change.path:
            files.pop(change.previous_path, None)
        if change.text is None:
            files.pop(change.path, None)
            continue
        data = change.text.encode("utf-8", errors="surrogateescape")
        files[change.path] = FileAt(blob_sha(data), len(data), True, change.text)
    return files


async def open_snapshot(
    source: ArchiveSource,
    settings: CodebaseSettings,
    *,
    installation_id: int,
    repo: str,
    base_ref: str,
    base_sha: str,
    head_sha: str,
    changed: Mapping[str, ChangedText],
) -> Snapshot | None:
    started = time.monotonic()
    folder = repo_folder(settings.cache_dir, repo)
    try:
        async with _fetch_lock(repo):
            meta, manifest = await _base_tree(source, settings, folder, installation_id, repo, base_sha)
        fetched = time.monotonic()
        snapshot = await asyncio.to_thread(_indexed, repo, head_sha, folder, meta, manifest, changed, settings)
        snapshot.timings = {"base_tree": fetched - started, "index": time.monotonic() - fetched}
    except (JobError, ArchiveRefused, Refused, OSError, sqlite3.Error) as exc:
        reason = exc.reason if isinstance(exc, JobError) else f"{type(exc).__name__}: {exc}"
        log.warning("codebase of %s@%s not available, reviewing without it: %s", repo, head_sha[:12], reason)
        return None
    log.info(
        "codebase of %s@%s: base %s, %d files, %d parsed now, %.1fs",
        repo,
        head_sha[:12],
        meta.base_sha[:12],
        len(snapshot.files),
        snapshot.parsed,
        time.monotonic() - started,
    )
    return snapshot


def _heads(
    store: TagStore, manifest: Mapping[str, Entry], changed: Mapping[str, ChangedText]
) -> dict[str, ChangedText]:
    """``changed``, each file the review did not read given its head text: the base's text (from the store) with its
    diff applied; left out when that cannot be had (a base file not in the archive, a diff that does not apply)."""
    out = dict(changed)
    for path, change in changed.items():
        if change.text is not None or change.diff is None:
            continue
        entry = manifest.get(change.previous_path or path)
        data = store.content(entry.blob) if entry is not None and entry.text else None
        base = data.decode("utf-8", errors="surrogateescape") if data is not None else None
        out[path] = ChangedText(path, apply(change.diff, base) if base is not None else None, change.previous_path)
    return out


def _indexed(
    repo: str,
    head_sha: str,
    folder: Path,
    meta: Meta,
    manifest: Mapping[str, Entry],
    changed: Mapping[str, ChangedText],
    settings: CodebaseSettings,
) -> Snapshot:
    """The snapshot at the head: the changed files overlaid on the base tree (one store for their base texts and the
    index), its index brought up to date."""
    store = TagStore(folder / STORE)
    files = overlay(manifest, _heads(store, manifest, changed))
    snapshot = Snapshot(repo, head_sha, store, files, CodeIndex(store, {}), settings)
    index, parsed = bring_up_to_date(
        store,
        {p: (f.blob, f.size) for p, f in files.items() if f.text},
        snapshot.text,
        stored=lambda p: files[p].changed is None,
        workers=settings.index_workers,
    )
    snapshot.index, snapshot.parsed = index, parsed
    return snapshot


class Refused(Exception):
    """This base's archive was refused before (too large, or unsafe): not fetched again until it is due."""


async def _base_tree(
    source: ArchiveSource, settings: CodebaseSettings, folder: Path, installation_id: int, repo: str, base_sha: str
) -> tuple[Meta, dict[str, Entry]]:
    """The cached base tree and its manifest, fetched and unpacked first when missing or too old. An archive refused
    (over a limit, or unsafe) is remembered like a fetched one, so the next reviews do not ask for it again."""
    now = time.time()
    cached = await asyncio.to_thread(_cached, folder, base_sha, now, settings)
    if cached is not None:
        return cached
    archive = folder / f".download-{secrets.token_hex(6)}.tar.gz"
    try:
        await source.download_archive(
            installation_id, repo, base_sha, archive, max_bytes=settings.limits.max_archive_bytes
        )
        return await asyncio.to_thread(_store, archive, folder, repo, base_sha, now, settings)
    except (ArchiveRefused, ArchiveTooLarge) as exc:
        await asyncio.to_thread(write_meta, folder, Meta(base_sha, now, now, "", refused=str(exc)[:300]))
        raise
    finally:
        await asyncio.to_thread(_discard, archive)


def _cached(
    folder: Path, base_sha: str, now: float, settings: CodebaseSettings
) -> tuple[Meta, dict[str, Entry]] | None:
    """The cached tree when it may serve ``base_sha`` (the base's move recorded); None when it must be fetched."""
    meta = read_meta(folder)
    if meta is not None and not needs_fetch(meta, base_sha, now, settings):
        if meta.refused:
            raise Refused(meta.refused)
        manifest = read_manifest(folder, meta)
        if manifest is not None:
            if meta.base_sha != base_sha and base_sha not in meta.moves:
                meta.moves.append(base_sha)
            touch(folder, meta, now=now)
            return meta, manifest
    folder.mkdir(parents=True, exist_ok=True)
    return None


def _store(
    archive: Path, folder: Path, repo: str, base_sha: str, now: float, settings: CodebaseSettings
) -> tuple[Meta, dict[str, Entry]]:
    """Unpack a downloaded archive into the repository's store, record it, and keep the cache within its size."""
    unpacked = _ingest(archive, folder / STORE, settings)
    name = f"base-{base_sha[:40]}.json"
    write_manifest(folder / name, unpacked.files)
    meta = Meta(base_sha, now, now, name, sum(e.size for e in unpacked.files.values()))
    write_meta(folder, meta)
    prune_manifests(folder, keep=name)
    if unpacked.skipped:
        log.info("archive of %s@%s: skipped %s", repo, base_sha[:12], unpacked.skipped)
    evict(settings.cache_dir, settings.cache_bytes, keep=folder)
    return meta, unpacked.files


def _ingest(archive: Path, database: Path, settings: CodebaseSettings) -> Unpacked:
    """Unpack ``archive`` into the repository's store (its files by blob SHA), then forget the blobs of older trees."""
    store = TagStore(database)
    try:
        batch: list[tuple[str, bytes]] = []

        def keep(path: str, entry: Entry, data: bytes) -> None:
            batch.append((entry.blob, data))
            if len(batch) >= 500:
                store.put_contents(batch)
                batch.clear()

        unpacked = unpack(archive, settings.limits, keep)
        store.put_contents(batch)
        store.keep_only(e.blob for e in unpacked.files.values())
        return unpacked
    finally:
        store.close()


def _discard(path: Path) -> None:
    path.unlink(missing_ok=True)
