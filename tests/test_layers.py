"""Dependencies point inward: core/ uses nothing of ours outside it, store/ knows nothing of GitHub or the model, and
github/ (the GitHub adapter) does not reach into review/ (read from each module's imports)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "reviewer_app"


def imported(path: Path) -> set[str]:
    """The reviewer_app modules ``path`` imports, at any depth of its code (a deferred import counts too)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("reviewer_app"):
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(a.name for a in node.names if a.name.startswith("reviewer_app"))
    return names


@pytest.mark.parametrize(
    ("room", "forbidden"),
    [
        (
            "core",
            (
                "reviewer_app.store",
                "reviewer_app.github",
                "reviewer_app.review",
                "reviewer_app.dispatch",
                "reviewer_app.web",
                "reviewer_app.service",
                "reviewer_app.config",
            ),
        ),
        ("store", ("reviewer_app.github", "reviewer_app.review", "reviewer_app.web")),
        ("github", ("reviewer_app.review", "reviewer_app.web")),
    ],
)
def test_a_room_imports_nothing_it_must_not(room: str, forbidden: tuple[str, ...]) -> None:
    for path in sorted((PACKAGE / room).glob("*.py")):
        wrong = sorted(m for m in imported(path) if m.startswith(forbidden))
        assert not wrong, f"{room}/{path.name} imports {wrong}"
