"""Each queue in `status`, the metrics and the dashboard, on both stores: its queued and running jobs from the
database, and the slots of the processes alive now (their heartbeats)."""

from __future__ import annotations

import time

from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from reviewer_app.admin import Admin
from reviewer_app.admin_text import render_status
from reviewer_app.core.queues import REVIEWS
from reviewer_app.dispatch.registry import Registration
from reviewer_app.metrics import Metrics
from reviewer_app.web.dashboard import Dashboard
from tests.dispatch.test_dispatcher import admit
from tests.dispatch.test_queues import admit_question

TOKEN = "dashboard-token-0123456789"
LOADS = {
    "reviews": {"slots": 4, "running": 1},
    "answers": {"slots": 2, "running": 0},
    "housekeeping": {"slots": 3, "running": 1},
}


async def busy_queues(store) -> None:
    """Two reviews (one running) and one question queued; a live process with its slots per queue, and a gone one
    whose slots no longer count."""
    await admit(store, pr=1, head=1)
    await admit(store, pr=2, head=2)
    await admit_question(store, 77)
    now = time.time()
    await store.claim(owner="w-live", limit=1, now=now, lease_seconds=60, queue=REVIEWS)
    for worker_id, beat in (("w-live", now), ("w-gone", now - 600)):
        reg = Registration(
            store, worker_id=worker_id, role="worker", slots=6, lease_seconds=60, interval=20, clock=lambda b=beat: b
        )
        reg.queues = lambda: LOADS
        await reg.beat()


async def test_status_shows_each_queue_with_its_jobs_and_live_slots(store) -> None:
    await busy_queues(store)
    status = await Admin(store).status()
    assert status["queues"] == [
        {"queue": "reviews", "queued": 1, "running": 1, "slots": 4},
        {"queue": "answers", "queued": 1, "running": 0, "slots": 2},
        {"queue": "housekeeping", "queued": None, "running": 1, "slots": 3},
    ]
    text = render_status(status)
    assert "  reviews       1 queued, 1 running, 4 slot(s)" in text
    assert "  answers       1 queued, 0 running, 2 slot(s)" in text
    assert "  housekeeping  1 running, 3 slot(s)" in text
    assert "busy/slots: reviews 1/4, answers 0/2, housekeeping 1/3" in text


async def test_the_metrics_show_each_queue(store) -> None:
    await busy_queues(store)
    text = (await Metrics(store).render()).decode()
    for line in (
        'reviewer_queue_jobs{queue="reviews",state="queued"} 1.0',
        'reviewer_queue_jobs{queue="reviews",state="running"} 1.0',
        'reviewer_queue_jobs{queue="answers",state="queued"} 1.0',
        'reviewer_queue_slots{queue="answers"} 2.0',
        'reviewer_queue_slots{queue="housekeeping"} 3.0',
        'reviewer_queue_slots_busy{queue="reviews"} 1.0',
        'reviewer_queue_slots_busy{queue="housekeeping"} 1.0',
    ):
        assert line in text, line


async def test_the_dashboard_shows_each_queue(store) -> None:
    await busy_queues(store)
    app = web.Application()
    Dashboard(store, token=TOKEN, prices={}).register(app)
    client = TestClient(TestServer(app))
    await client.start_server()
    try:
        await client.post("/dashboard/login", data={"token": TOKEN}, allow_redirects=False)
        page = await (await client.get("/dashboard")).text()
        assert "<h2>Queues</h2>" in page
        assert "<tr><td>answers</td><td class=n>1</td><td class=n>0</td><td class=n>2</td></tr>" in page
        assert "<tr><td>housekeeping</td><td>-</td><td class=n>1</td><td class=n>3</td></tr>" in page
        workers = await (await client.get("/dashboard/workers")).text()
        assert "reviews 1/4, answers 0/2, housekeeping 1/3" in workers
    finally:
        await client.close()
