"""The steps a procedure yields: a named statement to run (and what of its result to hand back), or a wake-up to send
after the commit."""

from __future__ import annotations

from collections.abc import Generator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from reviewer_app.store import statements as s

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Rows:
    """Run a statement; every row."""

    stmt: s.Statement
    params: Sequence[Any] = ()


@dataclass(frozen=True, slots=True)
class Row:
    """Run a statement; its first row, or None."""

    stmt: s.Statement
    params: Sequence[Any] = ()


@dataclass(frozen=True, slots=True)
class Count:
    """Run a statement; the number of rows it changed."""

    stmt: s.Statement
    params: Sequence[Any] = ()


@dataclass(frozen=True, slots=True)
class Insert:
    """Insert one row; its id (SQLite: the row id; PostgreSQL: what ``RETURNING id`` gives, None on a conflict)."""

    stmt: s.Statement
    params: Sequence[Any] = ()


@dataclass(frozen=True, slots=True)
class Many:
    """Run a statement once per parameter tuple."""

    stmt: s.Statement
    params: Sequence[Sequence[Any]] = ()


@dataclass(frozen=True, slots=True)
class Later:
    """A write no later step of the transaction reads back: a driver may hold it and run it with the others of its
    statement just before the commit (PostgreSQL: one pipelined ``executemany`` per batch)."""

    stmt: s.Statement
    params: Sequence[Any] = ()


@dataclass(frozen=True, slots=True)
class Wake:
    """After the commit, wake whoever waits for claimable work. ``other_hosts``: only other hosts need to know (a
    hand-back or a rescue: this host's dispatcher already knows), so SQLite, one host, does nothing."""

    other_hosts: bool = False


Step = Rows | Row | Count | Insert | Many | Later | Wake
Procedure = Generator[Step, Any, T]

__all__ = ["Rows", "Row", "Count", "Insert", "Many", "Later", "Wake", "Step", "Procedure"]
