"""How a named statement is written for each dialect: once with ``?`` placeholders where SQLite and PostgreSQL agree
(the PostgreSQL driver renumbers them), as a ``Dialects`` pair only where they really differ."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache


@dataclass(frozen=True, slots=True)
class Dialects:
    """One statement in each dialect's words; None: the dialect has nothing to do (the step is skipped)."""

    sqlite: str | None
    postgres: str | None


Statement = str | Dialects


@lru_cache(maxsize=512)
def numbered(query: str) -> str:
    """The query with each ``?`` placeholder (outside string literals) renumbered as ``$1, $2, ...``."""
    out: list[str] = []
    n, quoted = 0, False
    for ch in query:
        if ch == "'":
            quoted = not quoted
        if ch == "?" and not quoted:
            n += 1
            out.append(f"${n}")
        else:
            out.append(ch)
    return "".join(out)


def with_json_ids(query: str) -> Dialects:
    """``query`` with ``{ids}`` standing for the integers of one parameter, a JSON array (e.g. ``NOT IN ({ids})``)."""
    return Dialects(
        query.format(ids="SELECT value FROM json_each(?)"),
        numbered(query.format(ids="SELECT value::bigint FROM json_array_elements_text(?::json) AS value")),
    )


def for_sqlite(stmt: Statement) -> str | None:
    return stmt.sqlite if isinstance(stmt, Dialects) else stmt


def for_postgres(stmt: Statement) -> str | None:
    return stmt.postgres if isinstance(stmt, Dialects) else numbered(stmt)


__all__ = ["Dialects", "Statement", "numbered", "with_json_ids", "for_sqlite", "for_postgres"]
