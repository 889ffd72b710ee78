"""The code index: each text file's tags (tags.py) kept on disk by the file's git blob SHA, so a new head re-indexes
only the blobs it has not seen, and looked up by name for one tree (a path-to-blob map) without holding every tag in
memory."""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from reviewer_app.codebase.scopes import grammar_name
from reviewer_app.codebase.tags import Tag, file_tags

log = logging.getLogger(__name__)

MAX_INDEXED_BYTES = 512 * 1024  # a larger source file is searched, not indexed (generated code, bundles)
BATCH = 500  # files parsed per transaction

_SCHEMA = """
CREATE TABLE IF NOT EXISTS blobs (blob TEXT PRIMARY KEY, tags INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS tags (
    blob TEXT NOT NULL, name TEXT NOT NULL, kind TEXT NOT NULL, line INTEGER NOT NULL, "end" INTEGER NOT NULL,
    scope TEXT NOT NULL
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
    """The tags of every blob indexed so far for one repository (SQLite on disk, next to its snapshot)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=OFF")  # a cache: a crash loses nothing that cannot be rebuilt
        self._db.executescript(_SCHEMA)

    def close(self) -> None:
        self._db.close()

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
                        "INSERT INTO tags VALUES (?, ?, ?, ?, ?, ?)",
                        [(blob, t.name, t.kind, t.line, t.end, t.scope) for t in tags],
                    )
            self._db.execute("COMMIT")
        except BaseException:
            self._db.execute("ROLLBACK")
            raise

    def by_name(self, name: str, *, definitions: bool) -> list[tuple[str, Tag]]:
        where = "kind NOT IN ('call', 'base')" if definitions else "kind IN ('call', 'base')"
        rows = self._db.execute(
            f'SELECT blob, name, kind, line, "end", scope FROM tags WHERE name = ? AND {where} LIMIT 20000', (name,)
        )
        return [(r[0], Tag(r[1], r[2], r[3], r[4], r[5])) for r in rows]

    def of_blob(self, blob: str) -> list[Tag]:
        rows = self._db.execute('SELECT name, kind, line, "end", scope FROM tags WHERE blob = ? ORDER BY line', (blob,))
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
    store: TagStore, files: Mapping[str, tuple[str, int]], read: Callable[[str], str | None]
) -> tuple[CodeIndex, int]:
    """The index of a tree (``files``: path -> (blob SHA, size)), parsing only the blobs the store has not seen;
    with how many files were parsed now."""
    wanted = {p: blob for p, (blob, size) in files.items() if indexable(p, size)}
    known = store.known(wanted.values())
    todo: dict[str, str] = {}
    for path, blob in wanted.items():
        if blob not in known and blob not in todo:
            todo[blob] = path
    parsed = 0
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
