"""What a release carries: the license pyproject names, a changelog entry for the version, and that version said in
one place (pyproject.toml) and shown by `--version` and `status` (the dashboard's header: tests/web)."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

from reviewer_app import __version__

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def test_the_license_file_is_the_mit_license_pyproject_names() -> None:
    assert PYPROJECT["license"] == "MIT"
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("MIT License\n") and "Copyright (c) 2026 reviewer-app contributors" in text
    assert 'THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND' in text


def test_the_version_is_said_once_and_the_changelog_has_its_entry() -> None:
    assert __version__ == metadata.version("reviewer-app") == PYPROJECT["version"]
    assert "version" not in (PYPROJECT.get("dynamic") or [])
    changelog = (ROOT / "CHANGELOG.md").read_text()
    assert f"\n## {PYPROJECT['version']} " in changelog
    # No module spells the version out: each reads reviewer_app.__version__.
    spelled = [p for p in (ROOT / "reviewer_app").rglob("*.py") if f'"{PYPROJECT["version"]}"' in p.read_text()]
    assert spelled == []


def test_version_prints_the_installed_version(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "reviewer_app.cli.main", "--version"], capture_output=True, text=True, cwd=tmp_path
    )
    assert (done.returncode, done.stdout) == (0, f"reviewer-app {__version__}\n")


def test_the_upgrade_steps_say_what_a_migration_does_and_how_to_roll_back() -> None:
    ops = (ROOT / "docs" / "operations.md").read_text()
    upgrading = ops.split("## Upgrading\n", 1)[1].split("\n## ", 1)[0]
    for words in ("**What a migration does.**", "schema_migrations", "Step by step", "**Rolling back.**", "CHANGELOG"):
        assert words in upgrading, words


def test_the_readmes_figures_say_how_they_were_obtained_and_include_the_verification() -> None:
    """Issue 42: the README's "about 3 cents" came from a fake model's token counts, left out the verification, and
    did not say so; its quality figures came from a stand-in."""
    readme = (ROOT / "README.md").read_text()
    quickstart = readme.split("## Quickstart", 1)[1].split("###", 1)[0]
    assert "verification of its findings included" in quickstart and "estimates" in quickstart
    assert "no live model was asked" in quickstart
    ops = (ROOT / "docs" / "operations.md").read_text()
    costs = ops.split("## What a review costs\n", 1)[1].split("\n## ", 1)[0]
    assert "**These are estimates, and this is how they were made.**" in costs
    # The README's median and 90th percentile are the table's totals, rounded to half cents.
    assert "| median | 4,681 + 2,109 |" in costs and "**$0.034**" in costs and "3½ cents" in quickstart
    assert "**$0.062**" in costs and "6 cents at the 90th percentile" in quickstart
    quality = readme.split("**Fewer findings, each one checked.**", 1)[1].split("\n- **", 1)[0]
    assert "stand-in" in quality and "verification pass counted in" in quality
