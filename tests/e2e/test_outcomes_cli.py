"""`reviewer-app outcomes [--repo OWNER/NAME] [--since DAYS] [--json]`: every published finding with its fate, and the
acted-on rate overall, by dimension and per experiment variant, as JSON for scripts and text for people."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from reviewer_app.cli.main import main
from reviewer_app.store.sqlite import SqliteStore
from tests.outcomes_seed import EXPERIMENT, REPOS, SeededOutcomes, seed_outcomes


async def _fill(path: Path) -> SeededOutcomes:
    store = SqliteStore(str(path))
    await store.open()
    try:
        return await seed_outcomes(store, time.time())
    finally:
        await store.close()


@pytest.fixture
def db(tmp_path, monkeypatch) -> tuple[Path, SeededOutcomes]:
    path = tmp_path / "reviewer.db"
    seeded = asyncio.run(_fill(path))
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{path}")
    for name in ("GITHUB_WEBHOOK_SECRET", "REVIEWER_INSECURE_NO_SIGNATURE", "GITHUB_APP_ID"):
        monkeypatch.delenv(name, raising=False)  # a database command needs no webhook secret
    return path, seeded


def run_json(capsys, *args: str) -> dict:
    assert main(["outcomes", "--json", *args]) == 0
    return json.loads(capsys.readouterr().out)


def test_json_lists_every_finding_with_its_fate_and_the_aggregates(db, capsys) -> None:
    _, seeded = db
    report = run_json(capsys)

    findings = report["findings"]
    assert len(findings) == sum(seeded.fates.values())
    assert {k for f in findings for k in ("repo", "pr", "path", "line", "severity", "fate")} <= set(findings[0])
    assert {f["repo"] for f in findings} == set(REPOS)
    counts = {fate: sum(1 for f in findings if f["fate"] == fate) for fate in seeded.fates}
    assert counts == seeded.fates
    overall = report["overall"]
    decided = seeded.fates["fixed"] + seeded.fates["dismissed"] + seeded.fates["open_at_merge"]
    assert overall["decided"] == decided
    assert overall["acted_on_rate"] == pytest.approx(seeded.fates["fixed"] / decided)
    low, high = overall["interval_95"]
    assert low < overall["acted_on_rate"] < high
    for dimension in ("repo", "severity", "category", "file_type", "model", "prompt_version", "learning"):
        rows = report["by"][dimension]
        assert sum(r["decided"] for r in rows) == decided, dimension
    [experiment] = report["experiments"]
    assert experiment["name"] == EXPERIMENT
    assert [v["variant"] for v in experiment["variants"]] == ["a", "b"]
    assert [v["reviews"] for v in experiment["variants"]] == [seeded.variants["a"], seeded.variants["b"]]
    assert all(v["findings_per_review"] == 3 and v["cost_per_review"] > 0 for v in experiment["variants"])
    assert "significant" in experiment["note"]


def test_repo_and_since_narrow_the_report(db, capsys) -> None:
    _, seeded = db
    report = run_json(capsys, "--repo", "octo/widgets")
    assert {f["repo"] for f in report["findings"]} == {"octo/widgets"}
    assert len(report["findings"]) == seeded.by_repo["octo/widgets"]

    recent = run_json(capsys, "--since", "3")
    assert 0 < len(recent["findings"]) < sum(seeded.fates.values())
    assert min(f["created_at"] for f in recent["findings"]) > time.time() - 3 * 86400

    assert run_json(capsys, "--repo", "nobody/here")["findings"] == []


def test_text_names_the_rate_and_the_experiment(db, capsys) -> None:
    assert main(["outcomes"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("acted-on rate over the last 30 days: ")
    assert "by category:" in text and f"experiment {EXPERIMENT}:" in text


def test_no_database_is_one_line_and_status_1(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path / 'none.db'}")
    monkeypatch.delenv("GITHUB_WEBHOOK_SECRET", raising=False)
    assert main(["outcomes"]) == 1
    assert "no database at" in capsys.readouterr().err
