"""The code index and the files it indexes, on disk by git blob SHA: each file's bytes and each text file's tags
(tags.py), so a new head re-indexes only the blobs it has not seen; looked up by name for one tree (a path-to-blob map)
without holding every tag, or every file, in memory."""

from __future__ import annotations

import logging
import multiprocessing
import os
import sqlite3
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from reviewer_app.codebase.scopes import grammar_name
from reviewer_app.codebase.tags import Tag, file_tags

log = logging.getLogger(__name__)

MAX_INDEXED_BYTES = 512 * 1024  # a larger source file is searched, not indexed (generated code, bundles)
BATCH = 500  # files parsed per transaction
PARALLEL_FROM = 300  # files to parse: from this many on, worker processes share the parsing (one per core)
CHUNK = 100  # files per task of a worker process

SCHEMA_VERSION = 4  # 2: references carry their receiver; 3: module-level constants are definitions; 4: JavaScript's
# functions bound to a member or an object's key (``self.reset = function ...``) are definitions
_SCHEMA = """
CREATE TABLE IF NOT EXISTS contents (blob TEXT PRIMARY KEY, data BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS blobs (blob TEXT PRIMARY KEY, tags INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS tags (
    blob TEXT NOT NULL, name TEXT NOT NULL, kind TEXT NOT NULL, line INTEGER NOT NULL, "end" INTEGER NOT NULL,
    scope TEXT NOT NULL, receiver TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS tags_by_name ON tags (name);
CREATE INDEX IF NOT EXISTS tags_by_blob ON tags (blob);
"""


@dataclass(frozen=True)
class Located:
    """A tag in a file of the tree."""

    path: str
    tag: Tag


class TagStore:
    """One repository's files by blob SHA and the tags of every blob indexed so far (SQLite, in its cache folder)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=30)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=OFF")  # a cache: a crash loses nothing that cannot be rebuilt
        if self._db.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
            # An older index: its tags are parsed again from the files it holds (the files themselves are kept).
            self._db.executescript("DROP TABLE IF EXISTS tags; DROP TABLE IF EXISTS blobs;")
            self._db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        self._db.executescript(_SCHEMA)

    def close(self) -> None:
        self._db.close()

    def put_contents(self, items: Iterable[tuple[str, bytes]]) -> None:
        self._db.execute("BEGIN")
        try:
            self._db.executemany("INSERT OR IGNORE INTO contents VALUES (?, ?)", items)
            self._db.execute("COMMIT")
        except BaseException:
            self._db.execute("ROLLBACK")
            raise

    def content(self, blob: str) -> bytes | None:
        row = self._db.execute("SELECT data FROM contents WHERE blob = ?", (blob,)).fetchone()
        return bytes(row[0]) if row else None

    def keep_only(self, blobs: Iterable[str]) -> None:
        """Forget every file and tag but those of ``blobs`` (a new base tree: the old one's blobs go)."""
        self._db.execute("BEGIN")
        try:
            self._db.execute("CREATE TEMP TABLE IF NOT EXISTS keep (blob TEXT PRIMARY KEY)")
            self._db.execute("DELETE FROM keep")
            self._db.executemany("INSERT OR IGNORE INTO keep VALUES (?)", ((b,) for b in blobs))
            for table in ("contents", "blobs", "tags"):
                self._db.execute(f"DELETE FROM {table} WHERE blob NOT IN (SELECT blob FROM keep)")
            self._db.execute("COMMIT")
        except BaseException:
            self._db.execute("ROLLBACK")
            raise

    def known(self, blobs: Iterable[str]) -> set[str]:
        wanted = list(dict.fromkeys(blobs))
        found: set[str] = set()
        for i in range(0, len(wanted), 500):
            chunk = wanted[i : i + 500]
            marks = ",".join("?" * len(chunk))
            found.update(r[0] for r in self._db.execute(f"SELECT blob FROM blobs WHERE blob IN ({marks})", chunk))
        return found

    def add(self, indexed: Mapping[str, list[Tag]]) -> None:
        """Store the tags of each blob (one transaction; a blob already stored is left as it is)."""
        self._db.execute("BEGIN")
        try:
            for blob, tags in indexed.items():
                if self._db.execute("INSERT OR IGNORE INTO blobs VALUES (?, ?)", (blob, len(tags))).rowcount:
                    self._db.executemany(
                        "INSERT INTO tags VALUES (?, ?, ?, ?, ?, ?, ?)",
                        [(blob, t.name, t.kind, t.line, t.end, t.scope, t.receiver) for t in tags],
                    )
            self._db.execute("COMMIT")
        except BaseException:
            self._db.execute("ROLLBACK")
            raise

    def by_name(self, name: str, *, definitions: bool) -> list[tuple[str, Tag]]:
        where = "kind NOT IN ('call', 'base')" if definitions else "kind IN ('call', 'base')"
        rows = self._db.execute(
            f'SELECT blob, name, kind, line, "end", scope, receiver FROM tags WHERE name = ? AND {where} LIMIT 20000',
            (name,),
        )
        return [(r[0], Tag(*r[1:])) for r in rows]

    def of_blob(self, blob: str) -> list[Tag]:
        rows = self._db.execute(
            'SELECT name, kind, line, "end", scope, receiver FROM tags WHERE blob = ? ORDER BY line', (blob,)
        )
        return [Tag(*r) for r in rows]

    def definition_counts(self, names: Iterable[str]) -> dict[str, int]:
        """How many definitions each name has in every blob stored (a cheap upper bound for a tree's)."""
        wanted = list(dict.fromkeys(names))
        counts: dict[str, int] = {}
        for i in range(0, len(wanted), 500):
            chunk = wanted[i : i + 500]
            marks = ",".join("?" * len(chunk))
            for name, n in self._db.execute(
                f"SELECT name, COUNT(*) FROM tags WHERE name IN ({marks}) AND kind NOT IN ('call', 'base') "
                "GROUP BY name",
                chunk,
            ):
                counts[name] = n
        return counts


class CodeIndex:
    """Definitions and references by name in one tree: ``files`` maps each indexed path to its blob SHA."""

    def __init__(self, store: TagStore, files: Mapping[str, str]) -> None:
        self.store = store
        self.files = dict(files)
        self._paths: dict[str, list[str]] = {}
        for path, blob in self.files.items():
            self._paths.setdefault(blob, []).append(path)

    def definitions(self, name: str) -> list[Located]:
        return self._located(self.store.by_name(name, definitions=True))

    def references(self, name: str) -> list[Located]:
        return self._located(self.store.by_name(name, definitions=False))

    def tags(self, path: str) -> list[Tag]:
        blob = self.files.get(path)
        return self.store.of_blob(blob) if blob else []

    def _located(self, rows: list[tuple[str, Tag]]) -> list[Located]:
        out = [Located(path, tag) for blob, tag in rows for path in self._paths.get(blob, ())]
        out.sort(key=lambda x: (x.path, x.tag.line))
        return out


def indexable(path: str, size: int) -> bool:
    return size <= MAX_INDEXED_BYTES and grammar_name(path) is not None


def bring_up_to_date(
    store: TagStore,
    files: Mapping[str, tuple[str, int]],
    read: Callable[[str], str | None],
    *,
    stored: Callable[[str], bool] | None = None,
    workers: int | None = None,
) -> tuple[CodeIndex, int]:
    """The index of a tree (``files``: path -> (blob SHA, size)), parsing only the blobs the store has not seen;
    with how many files were parsed now. Many files whose bytes are in the store (``stored`` says which) are parsed
    by worker processes, one per core unless ``workers`` says."""
    wanted = {p: blob for p, (blob, size) in files.items() if indexable(p, size)}
    known = store.known(wanted.values())
    todo: dict[str, str] = {}
    for path, blob in wanted.items():
        if blob not in known and blob not in todo:
            todo[blob] = path
    count = workers if workers is not None else min(os.cpu_count() or 1, 4)
    parallel = [(blob, path) for blob, path in todo.items() if stored is not None and stored(path)]
    parsed = 0
    if count > 1 and len(parallel) >= PARALLEL_FROM:
        _parse_in_workers(store, parallel, count)
        parsed = len(parallel)
        done = {blob for blob, _ in parallel}
        todo = {blob: path for blob, path in todo.items() if blob not in done}
    pending: dict[str, list[Tag]] = {}
    for blob, path in todo.items():
        text = read(path)
        tags = file_tags(path, text) if text is not None else None
        pending[blob] = tags or []
        parsed += 1
        if len(pending) >= BATCH:
            store.add(pending)
            pending = {}
    if pending:
        store.add(pending)
    return CodeIndex(store, wanted), parsed


def _parse_in_workers(store: TagStore, items: list[tuple[str, str]], workers: int) -> None:
    """Parse ``(blob, path)`` in worker processes that read the bytes from the store's file (forkserver: nothing of
    this process's threads or connections is inherited), storing each chunk's tags as it comes."""
    chunks = [(str(store.path), items[i : i + CHUNK]) for i in range(0, len(items), CHUNK)]
    context = multiprocessing.get_context("forkserver")
    with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        for result in pool.map(parse_files, chunks):
            store.add({blob: [Tag(*t) for t in tags] for blob, tags in result})


def parse_files(
    task: tuple[str, list[tuple[str, str]]],
) -> list[tuple[str, list[tuple[str, str, int, int, str, str]]]]:
    """A worker process's task: the tags of each ``(blob, path)``, its bytes read from the store, as plain tuples."""
    database, items = task
    db = sqlite3.connect(f"file:{database}?mode=ro", uri=True, timeout=30)
    out: list[tuple[str, list[tuple[str, str, int, int, str, str]]]] = []
    try:
        for blob, path in items:
            row = db.execute("SELECT data FROM contents WHERE blob = ?", (blob,)).fetchone()
            text = bytes(row[0]).decode("utf-8", errors="replace") if row else None
            tags = (file_tags(path, text) or []) if text is not None else []
            out.append((blob, [(t.name, t.kind, t.line, t.end, t.scope, t.receiver) for t in tags]))
    finally:
        db.close()
    return out
