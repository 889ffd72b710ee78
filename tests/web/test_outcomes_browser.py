"""The Outcomes page in a real browser (Debian's headless Chromium driven by Playwright), on both stores: the rate
and its chart drawn inline with no script, both variants of the experiment side by side with the significance note,
the worst categories linked to their findings, untrusted text kept text; and its screenshot for docs/.

DASHBOARD_SCREENSHOT_DIR=docs/dashboard writes docs/dashboard/outcomes.png (as the sqlite run sees it)."""

from __future__ import annotations

import os
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from reviewer_app.core.pricing import DEFAULT_PRICES
from reviewer_app.web.dashboard import Dashboard
from tests.outcomes_seed import EXPERIMENT, SeededOutcomes, seed_outcomes
from tests.web.test_dashboard_browser import TOKEN, browser, signed_in_page

__all__ = ["browser"]  # the Chromium fixture, shared with the other dashboard pages' tests


@pytest.fixture
async def site(store) -> AsyncIterator[tuple[str, SeededOutcomes]]:
    seeded = await seed_outcomes(store, time.time())
    app = web.Application()
    Dashboard(store, token=TOKEN, prices=DEFAULT_PRICES).register(app)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    try:
        yield str(server.make_url("")).rstrip("/"), seeded
    finally:
        await server.close()


async def test_the_outcomes_page_shows_the_rate_its_chart_both_variants_and_the_worst_categories(
    browser, site, store, tmp_path, request
) -> None:
    base, seeded = site
    urls: list[str] = []
    problems: list[str] = []
    context, page = await signed_in_page(browser, base, urls, problems)
    await page.click("header >> text=Outcomes")
    await page.wait_for_url(base + "/dashboard/outcomes")

    decided = seeded.fates["fixed"] + seeded.fates["dismissed"] + seeded.fates["open_at_merge"]
    rate = round(100 * seeded.fates["fixed"] / decided)
    text = await page.inner_text("#rate")
    assert f"Acted-on rate over the last 30 days: {rate}%" in text and f"of {decided} decided findings" in text
    for fate, n in seeded.fates.items():
        assert (await page.inner_text(f"#fate-{fate} b")) == f"{n:,}"

    chart = page.locator("svg#rate-chart")
    assert await chart.count() == 1
    assert await chart.locator("polyline").count() == 1 and await chart.locator("circle").count() >= 10
    box = await chart.bounding_box()
    assert box is not None and box["width"] > 500 and box["height"] > 100  # drawn, not blocked by the style policy

    rows = page.locator("h3", has_text=EXPERIMENT).locator("xpath=following-sibling::table[1]//tbody/tr")
    assert await rows.count() == 2
    a, b = (await rows.nth(0).inner_text(), await rows.nth(1).inner_text())
    assert a.startswith("a") and "min_confidence: 50" in a and b.startswith("b") and "min_confidence: 65" in b
    assert str(seeded.variants["a"]) in a and "$" in a and "$" in b
    note = await page.inner_text(f"#experiment-{EXPERIMENT}-note")
    assert "significant" in note

    links = page.locator("#worst a")
    assert await links.count() >= 1
    href = await links.first.get_attribute("href")
    assert href.startswith("https://github.com/octo/") and "#discussion_r" in href
    main = await page.inner_text("main")
    assert "Rename this variable <img src=x onerror=alert(3)>" in main and "octo/<b>gadgets</b>" in main
    assert await page.locator("main img").count() == 0

    shots = os.environ.get("DASHBOARD_SCREENSHOT_DIR")
    target = Path(shots) if shots and "sqlite" in request.node.name else tmp_path
    await page.set_viewport_size({"width": 1280, "height": 900})
    await page.screenshot(path=target / "outcomes.png", full_page=True)
    assert (target / "outcomes.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    # One repository, and a period that says what was wrong with it.
    await page.fill("input[name=repo]", "octo/widgets")
    await page.fill("input[name=days]", "a week")
    await page.click("form.filter button")
    await page.wait_for_url("**/dashboard/outcomes?**")
    assert "is not a number from 0 to 3650: showing 30" in await page.inner_text("main")
    table = page.locator("h3", has_text="By repo").locator("xpath=following-sibling::table[1]//tbody/tr")
    assert await table.count() == 1 and (await table.first.inner_text()).startswith("octo/widgets")

    assert all(TOKEN not in u for u in urls)
    assert all(u.startswith(base) for u in urls), "nothing is fetched from elsewhere"
    assert not [p for p in problems if "Content Security Policy" in p or "Refused" in p], problems
    await context.close()
