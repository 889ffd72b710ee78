"""The dashboard in a real browser: Debian's headless Chromium driven by Playwright, on both stores.

Skipped when Chromium or Playwright is missing on a developer's machine; failed on CI (CI=true), where .ci/run
installs Chromium. Nothing is downloaded at run time: Playwright drives /usr/bin/chromium."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import AsyncIterator

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from reviewer_app.core.pricing import DEFAULT_PRICES
from reviewer_app.web.dashboard import COOKIE, Dashboard
from tests.dashboard_seed import EVIL_REPO, queue_counts, seed

TOKEN = "browser-token-0123456789abcdef"
CHROMIUM = os.environ.get("REVIEWER_TEST_CHROMIUM") or "/usr/bin/chromium"
HAVE_CHROMIUM = os.path.exists(CHROMIUM) or shutil.which(CHROMIUM) is not None


def _missing(why: str) -> None:
    msg = f"{why}; `apt-get install chromium` and the test extra (playwright) run the browser tests"
    if os.environ.get("CI") == "true":
        pytest.fail(msg)
    pytest.skip(msg)


@pytest.fixture
async def browser() -> AsyncIterator[object]:
    try:
        from playwright.async_api import async_playwright
    except ImportError:
        _missing("playwright is not installed")
    if not HAVE_CHROMIUM:
        _missing(f"no Chromium at {CHROMIUM}")
    async with async_playwright() as p:
        b = await p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            yield b
        finally:
            await b.close()


@pytest.fixture
async def site(store) -> AsyncIterator[tuple[str, object]]:
    seeded = await seed(store, time.time())
    app = web.Application()
    Dashboard(store, token=TOKEN, prices=DEFAULT_PRICES).register(app)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    try:
        yield str(server.make_url("")).rstrip("/"), seeded
    finally:
        await server.close()


async def signed_in_page(browser, base: str, urls: list[str], problems: list[str]):
    context = await browser.new_context(viewport={"width": 1280, "height": 900})
    page = await context.new_page()
    page.on("request", lambda r: urls.append(r.url))
    page.on("console", lambda m: problems.append(m.text) if m.type in ("error", "warning") else None)
    await page.goto(base + "/dashboard")
    assert page.url == base + "/dashboard/login"  # no session: the login form
    await page.fill("input[name=token]", TOKEN)
    await page.click("button[type=submit]")
    await page.wait_for_url(base + "/dashboard")
    return context, page


async def test_a_person_logs_in_and_reads_every_page(browser, site) -> None:
    base, seeded = site
    urls: list[str] = []
    problems: list[str] = []
    context, page = await signed_in_page(browser, base, urls, problems)
    [cookie] = await context.cookies()
    assert cookie["name"] == COOKIE and cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    assert await page.evaluate("document.cookie") == ""  # HttpOnly: no script can read the session

    # Queue: the numbers per state, the running jobs and the failure of the last day.
    for state, n in queue_counts(seeded).items():
        assert (await page.inner_text(f"#count-{state} b")) == str(n), state
    assert "The queue is running." in await page.inner_text("#paused")
    text = await page.inner_text("main")
    assert "worker-gone" in text and "<img src=x onerror=alert(1)> permanent" in text  # shown as text, not markup
    assert await page.locator("main img").count() == 0

    # Workers: the gone process, with the job it held.
    await page.click("header >> text=Workers")
    await page.wait_for_url(base + "/dashboard/workers")
    assert "2 alive, 1 gone" in await page.inner_text("#summary")
    gone = page.locator("tr", has_text="host-b")
    assert await gone.locator("td.gone").inner_text() == "gone"
    held = seeded.ids["running"][1]
    assert await gone.locator(f"a[href='/dashboard/jobs/{held}']").count() == 1

    # Jobs: filter by repository (an untrusted name), then open one.
    await page.click("header >> text=Jobs")
    await page.fill("input[name=repo]", EVIL_REPO)
    await page.click("form.filter button")
    await page.wait_for_url("**/dashboard/jobs?**")
    rows = page.locator("tbody tr")
    assert await rows.count() == 6
    assert EVIL_REPO in await rows.first.inner_text()
    await rows.first.locator("a").click()
    await page.wait_for_url(f"{base}/dashboard/jobs/*")
    assert EVIL_REPO in await page.inner_text("#facts")
    await page.goto(f"{base}/dashboard/jobs/{seeded.reviewed}")
    review = page.locator("#link-review")
    assert (await review.get_attribute("href")).startswith("https://github.com/octo/")
    assert await page.locator("#link-check_run").count() == 1
    assert "output tokens over 1 attempt(s), estimated $" in await page.inner_text("#usage")

    # Spend: the table and the chart, drawn as SVG and loaded as an image of this origin.
    await page.click("header >> text=Spend")
    await page.wait_for_url(base + "/dashboard/spend")
    assert "$" in await page.inner_text("#total")
    chart = page.locator("#chart")
    await chart.wait_for()
    assert await page.evaluate("document.getElementById('chart').complete")
    assert await page.evaluate("document.getElementById('chart').naturalWidth") > 0
    svg = await page.request.get(base + "/dashboard/spend.svg")
    assert svg.headers["content-type"].startswith("image/svg+xml") and "<svg" in await svg.text()

    # Learnings: each repository's, with its source linked; untrusted text stays text.
    await page.click("header >> text=Learnings")
    await page.wait_for_url(base + "/dashboard/learnings")
    row = page.locator("tr", has_text="missing docstrings")
    source = row.locator("a")
    assert (await source.inner_text()).startswith("/review learn by alice, ")
    assert await source.get_attribute("href") == "https://github.com/octo/widgets/pull/1#issuecomment-7001"
    text = await page.inner_text("main")
    assert "<img src=x onerror=alert(2)> in templates." in text and EVIL_REPO in text
    assert await page.locator("main img").count() == 0

    # Log out: the pages are closed again.
    await page.click("header button[type=submit]")
    await page.wait_for_url(base + "/dashboard/login")
    await page.goto(base + "/dashboard/spend")
    assert page.url == base + "/dashboard/login"

    assert all(TOKEN not in u for u in urls), "the token must never be in a URL"
    assert not [p for p in problems if "Content Security Policy" in p or "Refused" in p], problems
    await context.close()


async def test_a_wrong_token_a_missing_cookie_and_a_forged_cookie_get_nothing(browser, site, store) -> None:
    base, _ = site
    context = await browser.new_context()
    page = await context.new_page()
    # Missing cookie: every page sends the browser to the login form.
    for path in ("/dashboard", "/dashboard/workers", "/dashboard/jobs", "/dashboard/jobs/1", "/dashboard/spend"):
        await page.goto(base + path)
        assert page.url == base + "/dashboard/login", path
    # Wrong token: 401, the form again, no cookie.
    await page.fill("input[name=token]", "wrong-token-wrong-token")
    async with page.expect_response(base + "/dashboard/login") as answer:
        await page.click("button[type=submit]")
    assert (await answer.value).status == 401
    assert "Wrong token." in await page.inner_text("main")
    assert await context.cookies() == []
    # Forged cookie: signed with another key, and a made-up one.
    for value in (Dashboard(store, token="x" * 20, prices={}).new_session(), "v1.99999999999.00.00"):
        await context.add_cookies([{"name": COOKIE, "value": value, "url": base + "/dashboard"}])
        await page.goto(base + "/dashboard")
        assert page.url == base + "/dashboard/login"
        assert "worker-live" not in await page.content()
    await context.close()
