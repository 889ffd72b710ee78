"""Dependencies point inward: core/ uses nothing of ours outside it, store/ knows nothing of GitHub or the model, and
github/ (the GitHub adapter) does not reach into review/ (read from each module's imports, in subpackages too). And a
room's modules stay small enough to read in one sitting."""

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
    for path in sorted((PACKAGE / room).rglob("*.py")):
        wrong = sorted(m for m in imported(path) if m.startswith(forbidden))
        assert not wrong, f"{path.relative_to(PACKAGE)} imports {wrong}"


MAX_LINES = 500  # past this a module holds two concerns


@pytest.mark.parametrize("room", ["store"])
def test_no_module_of_a_room_is_over_the_line_limit(room: str) -> None:
    long = {
        str(path.relative_to(PACKAGE)): n
        for path in sorted((PACKAGE / room).rglob("*.py"))
        if (n := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert not long, f"modules over {MAX_LINES} lines (split them by concern): {long}"
