"""Screenshot every dashboard page for docs/: `python docs/dashboard/make_screenshots.py`.

A fresh SQLite store is filled with jobs in every state (tests/dashboard_seed.py, through the store's own
procedures), the dashboard is served on a loopback port, and Debian's headless Chromium (`apt-get install chromium`)
driven by Playwright (`pip install -e '.[test]'`) logs in and takes one PNG per page into this folder.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from pathlib import Path

from aiohttp import web
from aiohttp.test_utils import TestServer
from playwright.async_api import async_playwright

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from reviewer_app.core.pricing import DEFAULT_PRICES  # noqa: E402
from reviewer_app.store.base import Usage  # noqa: E402
from reviewer_app.store.sqlite import SqliteStore  # noqa: E402
from reviewer_app.web.dashboard import Dashboard  # noqa: E402
from tests.dashboard_seed import MODEL, seed  # noqa: E402
from tests.outcomes_seed import seed_outcomes  # noqa: E402

HERE = Path(__file__).resolve().parent
TOKEN = "screenshot-token-0123456789"
CHROMIUM = "/usr/bin/chromium"


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = SqliteStore(f"{tmp}/reviewer.db")
        await store.open()
        now = time.time()
        seeded = await seed(store, now)
        await seed_outcomes(store, now)  # published findings with their fates, for the outcomes page
        # One review of today went through Message Batches, so the spend page shows the batched split and the saving.
        custom_id = f"job-{seeded.reviewed}-all"
        await store.record_batch_requests(
            seeded.reviewed, batch_id="msgbatch_01", model=MODEL, parts=[(custom_id, "all")], now=now
        )
        usage = Usage(model=MODEL, input_tokens=400_000, output_tokens=40_000)
        await store.settle_batch_request(custom_id, state="succeeded", result="{}", error=None, usage=usage, now=now)
        app = web.Application()
        Dashboard(store, token=TOKEN, prices=DEFAULT_PRICES).register(app)
        server = TestServer(app, host="127.0.0.1")
        await server.start_server()
        base = str(server.make_url("")).rstrip("/")
        shots = {
            "login": "/dashboard/login",
            "queue": "/dashboard",
            "workers": "/dashboard/workers",
            "jobs": "/dashboard/jobs",
            "job": f"/dashboard/jobs/{seeded.reviewed}",
            "spend": "/dashboard/spend",
            "learnings": "/dashboard/learnings",
            "outcomes": "/dashboard/outcomes",
        }
        try:
            async with async_playwright() as p:
                browser = await p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
                page = await browser.new_page(viewport={"width": 1280, "height": 800})
                await page.goto(base + shots.pop("login"))
                await page.screenshot(path=HERE / "login.png")
                await page.fill("input[name=token]", TOKEN)
                await page.click("button[type=submit]")
                await page.wait_for_url(base + "/dashboard")
                for name, path in shots.items():
                    await page.goto(base + path)
                    await page.wait_for_load_state("networkidle")
                    await page.screenshot(path=HERE / f"{name}.png", full_page=True)
                    print(f"wrote docs/dashboard/{name}.png")
                await browser.close()
        finally:
            await server.close()
            await store.close()


if __name__ == "__main__":
    asyncio.run(main())
