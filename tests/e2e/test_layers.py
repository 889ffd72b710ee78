"""Dependencies point inward: core/ uses nothing of ours outside it, store/ knows nothing of GitHub or the model,
github/ (the GitHub adapter) does not reach into review/, and codebase/ uses only core/ (read from each module's
imports, in subpackages too). And a room's modules stay small enough to read in one sitting."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "reviewer_app"


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
                "reviewer_app.settings.config",
            ),
        ),
        ("store", ("reviewer_app.github", "reviewer_app.review", "reviewer_app.web")),
        ("github", ("reviewer_app.review", "reviewer_app.web")),
        # The repository at the head: used by review/ through its interface; it uses core/ and nothing that runs
        # jobs, talks to GitHub (an ArchiveSource is handed in) or stores state.
        (
            "codebase",
            (
                "reviewer_app.review",
                "reviewer_app.web",
                "reviewer_app.dispatch",
                "reviewer_app.store",
                "reviewer_app.github",
                "reviewer_app.service",
                "reviewer_app.settings.config",
            ),
        ),
    ],
)
def test_a_room_imports_nothing_it_must_not(room: str, forbidden: tuple[str, ...]) -> None:
    for path in sorted((PACKAGE / room).rglob("*.py")):
        wrong = sorted(m for m in imported(path) if m.startswith(forbidden))
        assert not wrong, f"{path.relative_to(PACKAGE)} imports {wrong}"


MAX_LINES = 500  # past this a module holds two concerns


@pytest.mark.parametrize("room", ["store", "core", "review", "codebase"])
def test_no_module_of_a_room_is_over_the_line_limit(room: str) -> None:
    long = {
        str(path.relative_to(PACKAGE)): n
        for path in sorted((PACKAGE / room).rglob("*.py"))
        if (n := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert not long, f"modules over {MAX_LINES} lines (split them by concern): {long}"


# The walk of a review job, top to bottom (review/pipeline.py composes them). A stage takes the hand-off of the stages
# above it and may ask them again (the gate before each model call and before posting), never one below it.
STAGES = ("gate", "gather", "ask", "publish")
# What composes the stages: the review pipeline, the answers in threads, which reuse gate, ask and publish, and the
# review of one pull request on demand (`reviewer-app review`), which runs them all for a person's token, and of a
# checkout's commits (`reviewer-app review --local`).
COMPOSITIONS = ("pipeline", "answer", "one_pr", "local")


def _review_module(name: str) -> str:
    return f"reviewer_app.review.{name}"


@pytest.mark.parametrize("stage", STAGES)
def test_a_stage_imports_only_the_stages_above_it(stage: str) -> None:
    below = STAGES[STAGES.index(stage) + 1 :]
    forbidden = {_review_module(name) for name in (*below, *COMPOSITIONS)}
    wrong = sorted(imported(PACKAGE / "review" / f"{stage}.py") & forbidden)
    assert not wrong, f"review/{stage}.py imports {wrong}"


def test_what_the_stages_use_imports_no_stage() -> None:
    # The adapters and builders under the stages (the Claude client, prompt, rendering, memory, batches, ...) are
    # used by them; none of them reaches back up into a stage or what composes them.
    stages = {_review_module(name) for name in (*STAGES, *COMPOSITIONS)}
    helpers = [p for p in sorted((PACKAGE / "review").glob("*.py")) if _review_module(p.stem) not in stages]
    assert len(helpers) >= 10  # the rule reads the real room
    for path in helpers:
        wrong = sorted(imported(path) & stages)
        assert not wrong, f"review/{path.name} imports {wrong}"


def test_no_other_room_reaches_into_a_stage() -> None:
    # Only the service wires the runners (with review_stack.py), and `reviewer-app review` its one review; the stages are the review room's.
    stages = {_review_module(name) for name in (*STAGES, *COMPOSITIONS)}
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.parent.name == "review" or str(path.relative_to(PACKAGE)) in (
            "service.py",
            "review_stack.py",
            "cli/review.py",
            "cli/local.py",
        ):
            continue
        wrong = sorted(imported(path) & stages)
        assert not wrong, f"{path.relative_to(PACKAGE)} imports {wrong}"


def test_the_review_pipeline_fits_on_a_screen() -> None:
    lines = (PACKAGE / "review" / "pipeline.py").read_text().count("\n")
    assert lines < 150, f"review/pipeline.py has {lines} lines: it composes the stages, it does not do their work"


def external_imports(path: Path) -> set[str]:
    """The top-level names of the modules ``path`` imports from outside reviewer_app (stdlib and third party)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
        elif isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
    return names - {"reviewer_app"}


# What a pure module never needs: the network, the disk, the database, the clock, the event loop, the log.
IO_MODULES = (
    "aiohttp",
    "aiosqlite",
    "anthropic",
    "asyncio",
    "asyncpg",
    "gidgethub",
    "logging",
    "os",
    "pathlib",
    "socket",
    "sqlite3",
    "subprocess",
    "threading",
    "time",
)


@pytest.mark.parametrize("module", IO_MODULES)
def test_core_stays_pure(module: str) -> None:
    users = sorted(p.name for p in (PACKAGE / "core").rglob("*.py") if module in external_imports(p))
    assert not users, f"core/{users} import {module}: core decides over plain data and an explicit now"


def test_no_top_level_module_is_over_the_line_limit() -> None:
    """reviewer_app/*.py (config, settings, the admin commands, the command line, the service's wiring)."""
    long = {
        path.name: n for path in sorted(PACKAGE.glob("*.py")) if (n := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert not long, f"modules over {MAX_LINES} lines (split them by concern): {long}"


def test_the_tests_are_laid_out_like_the_code() -> None:
    # tests/<room>/ holds the tests of reviewer_app/<room>/ (plus e2e/ for the whole app and fakes/ for the fakes):
    # a test file left at the top is one a reader of a room will not find.
    tests = PACKAGE.parent / "tests"
    assert sorted(p.name for p in tests.glob("test_*.py")) == []
    rooms = {p.name for p in tests.iterdir() if p.is_dir() and any(p.glob("test_*.py"))}
    assert rooms == {"core", "store", "dispatch", "github", "review", "web", "e2e", "fakes", "codebase"}, rooms


def test_the_commands_and_the_settings_have_rooms_of_their_own() -> None:
    # The house shows its commands: every command-line module is in cli/, every settings module in settings/.
    top = {p.name for p in PACKAGE.glob("*.py")}
    strays = sorted(n for n in top if n.endswith("_cli.py") or n.startswith(("setting", "config")) or n == "cli.py")
    assert not strays, f"command-line or settings modules outside cli/ and settings/: {strays}"
    assert (PACKAGE / "cli" / "main.py").exists() and (PACKAGE / "settings" / "table.py").exists()


def test_the_dashboards_pages_and_its_spend_page_import_one_way() -> None:
    # The pages draw the spend the spend module sums; the spend module knows nothing of the pages.
    assert "reviewer_app.web.dashboard_pages" not in imported(PACKAGE / "web" / "dashboard_spend.py")
