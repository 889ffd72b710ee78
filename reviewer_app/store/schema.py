"""The schema of each dialect: numbered migration files under migrations/<engine>/, applied in order."""

from __future__ import annotations

from importlib import resources


def load_migrations(engine: str) -> list[tuple[int, str, str]]:
    """(version, name, sql) for each migration file of ``engine``, in order."""
    folder = resources.files("reviewer_app.store").joinpath("migrations", engine)
    out = []
    for entry in folder.iterdir():
        if entry.name.endswith(".sql"):
            out.append((int(entry.name.split("_", 1)[0]), entry.name, entry.read_text()))
    return sorted(out)
