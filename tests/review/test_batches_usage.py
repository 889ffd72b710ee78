"""`reviewer-app usage`: interactive and batched tokens apart, what they cost and what batching saved."""

from __future__ import annotations

import asyncio
import json

import pytest

from reviewer_app.cli.main import main
from reviewer_app.store.base import Usage
from reviewer_app.store.sqlite import SqliteStore
from tests.store.test_batches_store import deferred_job
from tests.store.test_store_contract import NOW

BATCHED = Usage(model="claude-sonnet-4-5", input_tokens=1_000_000, output_tokens=100_000)
INTERACTIVE = Usage(model="claude-sonnet-4-5", input_tokens=200_000, output_tokens=10_000)


async def _fill(path: str) -> None:
    store = SqliteStore(path, busy_timeout_ms=2000)
    await store.open()
    try:
        job_id = await deferred_job(store)
        [request] = await store.batch_requests_of(job_id)
        now = NOW
        await store.settle_batch_request(
            request.custom_id, state="succeeded", result="{}", error=None, usage=BATCHED, now=now
        )
        [lease] = await store.claim(owner="w", limit=1, now=now, lease_seconds=30)
        assert await store.complete_if_lease_held(lease, now=now, outcome="done", usage=INTERACTIVE)
    finally:
        await store.close()


# main() installs its own log handler: the test runner's is put back after each test (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("keep_logging")


def test_usage_shows_batched_and_interactive_apart_and_the_money_saved(tmp_path, monkeypatch, capsys) -> None:
    path = tmp_path / "reviewer.db"
    asyncio.run(_fill(str(path)))
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{path}")
    monkeypatch.delenv("GITHUB_WEBHOOK_SECRET", raising=False)
    monkeypatch.delenv("REVIEWER_PRICES", raising=False)
    days = ["--days", "100000"]  # the rows are dated NOW (2027); look back far enough from today either way

    assert main(["usage", *days, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    by_way = {r["batched"]: r for r in report["rows"]}
    # Sonnet: $3 in, $15 out per million; batched at half.
    assert by_way[True]["cost_usd"] == pytest.approx(2.25) and by_way[True]["saved_usd"] == pytest.approx(2.25)
    assert by_way[False]["cost_usd"] == pytest.approx(0.75) and by_way[False]["saved_usd"] == 0
    totals = report["totals"]
    assert (totals["batched_tokens"], totals["interactive_tokens"]) == (1_100_000, 210_000)
    assert totals["saved_usd"] == pytest.approx(2.25) and totals["unpriced_models"] == []

    assert main(["usage", *days]) == 0
    text = capsys.readouterr().out
    assert "batched" in text and "interactive" in text and "saved by batching: $2.25" in text

    monkeypatch.setenv("REVIEWER_PRICES", '{"claude-sonnet-4-5": {"input": 6, "output": 30}}')
    assert main(["usage", *days, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["totals"]["saved_usd"] == pytest.approx(4.5)
