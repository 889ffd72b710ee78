"""The read-only dashboard over HTTP, on both stores: who gets in, what each page shows, and that it only reads."""

from __future__ import annotations

import re
import time

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from reviewer_app.core.admission import Enqueue, JobSpec
from reviewer_app.core.pricing import DEFAULT_PRICES, Price, cost, estimate, parse_prices, price_of
from reviewer_app.service import build_service
from reviewer_app.settings.config import ConfigError, load_config
from reviewer_app.store.base import VERIFICATION, Delivery, Usage
from reviewer_app.web.dashboard import COOKIE, PAST_DAYS_SECONDS, Dashboard
from tests.dashboard_seed import EVIL_REPO, MODEL, _admit, queue_counts, seed
from tests.helpers import SECRET, eventually, sha

TOKEN = "dashboard-token-0123456789"


@pytest.fixture
async def dash(store):
    now = time.time()
    seeded = await seed(store, now)
    app = web.Application()
    Dashboard(store, token=TOKEN, prices=DEFAULT_PRICES).register(app)
    client = TestClient(TestServer(app))
    await client.start_server()
    try:
        yield client, seeded, store
    finally:
        await client.close()


async def login(client: TestClient, token: str = TOKEN):
    return await client.post("/dashboard/login", data={"token": token}, allow_redirects=False)


PAGES = (
    "/dashboard",
    "/dashboard/workers",
    "/dashboard/jobs",
    "/dashboard/jobs/1",
    "/dashboard/spend",
    "/dashboard/learnings",
)


async def test_without_a_session_every_page_redirects_to_the_login(dash) -> None:
    client, _, _ = dash
    for path in (*PAGES, "/dashboard/spend.svg"):
        r = await client.get(path, allow_redirects=False)
        assert r.status == 303 and r.headers["Location"] == "/dashboard/login", path


async def test_a_wrong_token_gets_401_and_no_cookie(dash) -> None:
    client, _, _ = dash
    r = await login(client, "not-the-token-at-all")
    assert r.status == 401
    assert COOKIE not in r.cookies
    assert "Wrong token." in await r.text()
    assert (await client.get("/dashboard", allow_redirects=False)).status == 303


async def test_a_forged_or_expired_cookie_gets_nothing(dash, store) -> None:
    client, _, _ = dash
    other = Dashboard(store, token="another-token-0123456789", prices={})
    forged = [
        other.new_session(),  # signed with another key
        "v1.9999999999.00.deadbeef",
        "garbage",
    ]
    mine = Dashboard(store, token=TOKEN, prices={}, clock=lambda: time.time() - 13 * 3600)
    forged.append(mine.new_session())  # right key, expired an hour ago
    payload, _, mac = Dashboard(store, token=TOKEN, prices={}).new_session().rpartition(".")
    parts = payload.split(".")
    forged.append(f"v1.{int(parts[1]) + 86400}.{parts[2]}.{mac}")  # a valid mac on another expiry
    for value in forged:
        client.session.cookie_jar.clear()
        client.session.cookie_jar.update_cookies({COOKIE: value})
        r = await client.get("/dashboard", allow_redirects=False)
        assert r.status == 303, value


async def test_login_sets_a_strict_httponly_cookie_and_logout_ends_it(dash) -> None:
    client, _, _ = dash
    r = await login(client)
    assert r.status == 303 and r.headers["Location"] == "/dashboard"
    cookie = r.headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/dashboard" in cookie
    assert "Secure" not in cookie  # plain http here; https (or X-Forwarded-Proto: https) adds it
    assert TOKEN not in cookie
    assert (await client.get("/dashboard", allow_redirects=False)).status == 200
    r = await client.post("/dashboard/logout", allow_redirects=False)
    assert r.status == 303
    assert (await client.get("/dashboard", allow_redirects=False)).status == 303


async def test_behind_an_https_proxy_the_cookie_is_secure(dash) -> None:
    client, _, _ = dash
    r = await client.post(
        "/dashboard/login", data={"token": TOKEN}, headers={"X-Forwarded-Proto": "https"}, allow_redirects=False
    )
    assert "Secure" in r.headers["Set-Cookie"]


async def test_a_cross_site_login_or_logout_is_refused(dash) -> None:
    client, _, _ = dash
    r = await client.post(
        "/dashboard/login", data={"token": TOKEN}, headers={"Origin": "https://evil.example"}, allow_redirects=False
    )
    assert r.status == 403 and COOKIE not in r.cookies


async def test_nothing_on_the_dashboard_changes_a_job(dash) -> None:
    """Only GET routes besides login and logout: a POST, PUT or DELETE elsewhere is not allowed."""
    client, seeded, store = dash
    await login(client)
    job_id = seeded.ids["queued"][0]
    for method in ("POST", "PUT", "DELETE", "PATCH"):
        for path in (*PAGES, f"/dashboard/jobs/{job_id}"):
            r = await client.request(method, path, allow_redirects=False)
            assert r.status == 405, (method, path)
    assert (await store.get_job(job_id)).state.value == "queued"


async def test_the_queue_page_shows_counts_running_jobs_and_failures(dash) -> None:
    client, seeded, _ = dash
    await login(client)
    r = await client.get("/dashboard")
    html = await r.text()
    csp = r.headers["Content-Security-Policy"]
    assert "default-src 'none'" in csp and "script-src" not in csp and "'unsafe-inline'" not in csp
    assert r.headers["Cache-Control"] == "no-store"
    counts = queue_counts(seeded)
    assert counts["succeeded"] == 3 and counts["failed"] == 1  # the day before is not counted
    for state, n in counts.items():
        assert re.search(rf"id='count-{state}'><b>{n}</b>", html), state
    running = seeded.ids["running"]
    for job_id in running:
        assert f"href='/dashboard/jobs/{job_id}'" in html
    assert "worker-gone" in html and "worker-live" in html
    # The failure of the last hour is listed with its (escaped) reason; the one of five days ago is not.
    assert "&lt;img src=x onerror=alert(1)&gt; permanent" in html
    assert "<img src=x" not in html and "<script>alert" not in html
    assert "model refused" not in html
    assert "The queue is running." in html


async def test_the_workers_page_shows_a_gone_process_with_its_job(dash) -> None:
    client, seeded, _ = dash
    await login(client)
    html = await (await client.get("/dashboard/workers")).text()
    assert "2 alive, 1 gone" in html
    gone_row = next(row for row in html.split("<tr>") if "host-b" in row)
    assert "class=gone" in gone_row and f"/dashboard/jobs/{seeded.ids['running'][1]}" in gone_row
    assert "(rescued in " in gone_row
    live_row = next(row for row in html.split("<tr>") if "host-a" in row)
    assert f"/dashboard/jobs/{seeded.ids['running'][0]}" in live_row and "rescued" not in live_row
    assert "serve --no-worker" in html


async def test_the_learnings_page_lists_each_repositorys_learnings_with_their_sources(dash) -> None:
    client, seeded, _ = dash
    await login(client)
    html = await (await client.get("/dashboard/learnings")).text()

    assert "<h2 id='repo-" in html and ">octo/widgets</h2>" in html
    first, second = seeded.learnings["octo/widgets"]
    row = next(r for r in html.split("<tr>") if "missing docstrings" in r)
    assert f"<td class=n>{first}</td>" in row and "(all files)" in row and "<td class=n>2</td>" in row
    assert "href='https://github.com/octo/widgets/pull/1#issuecomment-7001' rel=noreferrer" in row
    assert "/review learn by alice" in row
    assert "src/**" in next(r for r in html.split("<tr>") if "Prefer pathlib" in r)
    # Untrusted text, the repository's name and the learning's, is shown as text.
    assert "&lt;img src=x onerror=alert(2)&gt;" in html and "<img src=x" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "<script>" not in html
    # The feedback on findings, most 👎 first.
    votes = html.split("Feedback on the app", 1)[1].split("</table>", 1)[0]
    # The finding named by its file and title (escaped); a key no recent finding has, by the key.
    disliked = "<td>src/widget.py: f2 returns a constant &lt;b&gt;2&lt;/b&gt;</td><td class=n>0</td><td class=n>2</td>"
    assert disliked in votes
    assert votes.index(disliked) < votes.index("<code>eeeeeeeeeeee</code>")


async def test_the_jobs_page_filters_and_pages_newest_first(dash) -> None:
    client, seeded, _ = dash
    await login(client)
    html = await (await client.get("/dashboard/jobs", params={"repo": EVIL_REPO})).text()
    ids = [int(i) for i in re.findall(r"<td><a href='/dashboard/jobs/(\d+)'>", html)]
    assert ids == sorted(ids, reverse=True) and len(ids) == 6
    assert "evil/&lt;script&gt;alert(1)&lt;/script&gt;" in html and "<script>" not in html
    html = await (await client.get("/dashboard/jobs", params={"state": "failed"})).text()
    ids = [int(i) for i in re.findall(r"<td><a href='/dashboard/jobs/(\d+)'>", html)]
    assert sorted(ids) == sorted(seeded.ids["failed"])
    html = await (await client.get("/dashboard/jobs", params={"pr": "x1"})).text()
    assert "is not a number" in html
    # Pages of 50: 25 jobs fit on one; a page below the newest id starts there.
    newest = max(i for ids in seeded.ids.values() for i in ids)
    html = await (await client.get("/dashboard/jobs", params={"before": str(newest)})).text()
    ids = [int(i) for i in re.findall(r"<td><a href='/dashboard/jobs/(\d+)'>", html)]
    assert newest not in ids and ids and max(ids) < newest and "id=older" not in html


async def test_the_jobs_page_links_to_the_next_page(dash, monkeypatch) -> None:
    import reviewer_app.web.dashboard as module

    client, _, _ = dash
    monkeypatch.setattr(module, "PAGE_SIZE", 3)
    await login(client)
    html = await (await client.get("/dashboard/jobs", params={"state": "succeeded"})).text()
    ids = [int(i) for i in re.findall(r"<td><a href='/dashboard/jobs/(\d+)'>", html)]
    assert len(ids) == 3
    older = re.search(r"id=older href='([^']+)'", html).group(1).replace("&amp;", "&")
    assert f"before={ids[-1]}" in older and "state=succeeded" in older
    html = await (await client.get(older)).text()
    more = [int(i) for i in re.findall(r"<td><a href='/dashboard/jobs/(\d+)'>", html)]
    assert more and max(more) < min(ids)


async def test_one_job_shows_attempts_links_and_usage(dash) -> None:
    client, seeded, store = dash
    await login(client)
    job_id = seeded.reviewed
    job = await store.get_job(job_id)
    html = await (await client.get(f"/dashboard/jobs/{job_id}")).text()
    pr_url = f"https://github.com/{job.repo_full_name}/pull/{job.pr_number}"
    assert f"id='link-check_run' href='https://github.com/{job.repo_full_name}/runs/{job.check_run_id}'" in html
    assert f"id='link-review' href='{pr_url}#pullrequestreview-{job.review_id}'" in html
    [attempt] = await store.attempts_of(job_id)
    cost = estimate(
        {
            "model": MODEL,
            "input_tokens": attempt.input_tokens,
            "output_tokens": attempt.output_tokens,
            "cache_creation_tokens": attempt.cache_creation_tokens,
            "cache_read_tokens": attempt.cache_read_tokens,
        },
        DEFAULT_PRICES,
    )
    assert f"{attempt.input_tokens:,} input and {attempt.output_tokens:,} output tokens" in html
    assert f"${cost:,.2f}" in html and "review published" in html
    failed = seeded.ids["failed"][0]
    html = await (await client.get(f"/dashboard/jobs/{failed}")).text()
    assert "&lt;b&gt;model refused&lt;/b&gt;" in html
    assert (await client.get("/dashboard/jobs/999999")).status == 404


async def test_the_spend_page_prices_tokens_per_repository_and_day_with_a_chart(dash) -> None:
    client, _, _ = dash
    await login(client)
    html = await (await client.get("/dashboard/spend")).text()
    # octo/widgets: five days of usage, 10k*d input, 1k*d output, 500 cache writes and 2k cache reads per day.
    widgets = sum(
        cost(
            DEFAULT_PRICES,
            MODEL,
            input_tokens=10_000 * d,
            output_tokens=1_000 * d,
            cache_creation_tokens=500,
            cache_read_tokens=2_000,
            batched=False,
        ).dollars
        for d in range(1, 6)
    )
    row = next(r for r in html.split("<tr>") if r.startswith("<td>octo/widgets</td>"))
    assert f"${widgets:,.2f}" in row and "<td class=n>150,000</td>" in row
    assert "src='/dashboard/spend.svg'" in html
    r = await client.get("/dashboard/spend.svg")
    svg = await r.text()
    assert r.content_type == "image/svg+xml" and "<svg" in svg and "octo/widgets" in svg
    assert "<script>alert" not in svg and "evil/&lt;script&gt;" in svg
    assert "script-src" not in r.headers["Content-Security-Policy"]


async def test_the_dashboard_is_off_without_its_token_and_on_with_it_on_a_receiver_only_host(tmp_path) -> None:
    env = {"DATABASE_URL": f"sqlite:///{tmp_path / 'r.db'}", "GITHUB_WEBHOOK_SECRET": SECRET}
    for token, expected in (("", 404), (TOKEN, 303)):
        svc = await build_service(load_config({**env, "REVIEWER_DASHBOARD_TOKEN": token}), worker=False)
        client = TestClient(TestServer(svc.app))
        await client.start_server()
        try:
            assert (await client.get("/dashboard", allow_redirects=False)).status == expected
            if token:
                assert (await login(client)).status == 303
                assert (await client.get("/dashboard/workers")).status == 200
        finally:
            await client.close()
            await svc.stop()


def test_prices_parse_override_and_match_dated_models() -> None:
    prices = parse_prices(
        '{"claude-sonnet-4-5": {"input": 1, "output": 2, "cache_write": 3, "cache_read": 4}, '
        '"my-model": {"input": 0.5, "output": 1}}'
    )
    assert prices["claude-sonnet-4-5"] == Price(1, 2, 3, 4) and prices["my-model"] == Price(0.5, 1, 0, 0)
    assert prices["claude-haiku-4-5"] == DEFAULT_PRICES["claude-haiku-4-5"]  # the rest of the table stays
    assert price_of(DEFAULT_PRICES, "claude-sonnet-4-5-20250929") == DEFAULT_PRICES["claude-sonnet-4-5"]
    assert price_of(DEFAULT_PRICES, "claude-opus-4-1-20250805") == DEFAULT_PRICES["claude-opus-4-1"]
    assert price_of(DEFAULT_PRICES, "gpt-5") is None
    for bad in ("nomodel", '{"m": [1, 2]}', '{"m": {"input": "a"}}', '{"m": {"input": -1}}', '{"m": {"price": 1}}'):
        with pytest.raises(ConfigError):
            load_config({"GITHUB_WEBHOOK_SECRET": "s", "REVIEWER_PRICES": bad})
    with pytest.raises(ConfigError, match="16 characters"):
        load_config({"GITHUB_WEBHOOK_SECRET": "s", "REVIEWER_DASHBOARD_TOKEN": "short"})


async def test_spend_of_today_shows_at_once_and_a_model_without_a_price_is_marked(dash) -> None:
    client, _, store = dash
    await login(client)
    before = re.search(r"id=total>[^$]*\$([0-9.,]+)", await (await client.get("/dashboard/spend")).text()).group(1)
    await client.get("/dashboard/spend.svg")
    now = time.time()
    spec = JobSpec(repo_id=5, repo_full_name="octo/new", installation_id=7, pr_number=1, head_sha=sha("new"))
    await store.admit(Delivery("spend-today", "pull_request", "opened"), Enqueue(spec), now=now, max_attempts=3)
    [lease] = [le for le in await store.claim(owner="w", limit=10, now=now, lease_seconds=60) if le.job.repo_id == 5]
    await store.complete_if_lease_held(lease, now=now, outcome="done", usage=Usage("mystery-model", 1000, 100, 0, 0))
    html = await (await client.get("/dashboard/spend")).text()
    row = next(r for r in html.split("<tr>") if r.startswith("<td>octo/new</td>"))
    assert "<td class=n>$0.00 + ?</td>" in row and "<td class=n>1,000</td>" in row
    after = re.search(r"id=total>[^$]*\$([0-9.,]+)", html).group(1)
    assert after == before  # an unpriced model adds tokens, not dollars
    svg = await (await client.get("/dashboard/spend.svg")).text()
    assert "octo/new" in svg  # the chart was drawn again: its numbers changed


async def test_no_token_reaches_the_log(dash, caplog) -> None:
    client, _, _ = dash
    caplog.set_level("DEBUG")
    await login(client, "a-wrong-token-that-is-long")
    await login(client)
    await client.get("/dashboard")
    assert "dashboard: login refused" in caplog.text and "dashboard: signed in" in caplog.text
    assert TOKEN not in caplog.text and "a-wrong-token-that-is-long" not in caplog.text


async def test_the_spend_page_shows_batched_tokens_apart_and_what_batching_saved(dash) -> None:
    client, seeded, store = dash
    await login(client)
    html = await (await client.get("/dashboard/spend")).text()
    assert "<b id=saved>$0.00</b>" in html  # nothing went through Message Batches yet
    job_id = seeded.reviewed
    job = await store.get_job(job_id)
    now = time.time()
    await store.record_batch_requests(
        job_id, batch_id="msgbatch_1", model=MODEL, parts=[(f"job-{job_id}-all", "all")], now=now
    )
    usage = Usage(model=MODEL, input_tokens=1_000_000, output_tokens=0)
    await store.settle_batch_request(
        f"job-{job_id}-all", state="succeeded", result="{}", error=None, usage=usage, now=now
    )
    html = await (await client.get("/dashboard/spend")).text()
    full = cost(
        DEFAULT_PRICES,
        MODEL,
        input_tokens=1_000_000,
        output_tokens=0,
        cache_creation_tokens=0,
        cache_read_tokens=0,
        batched=False,
    ).dollars
    assert full is not None and full > 0
    assert f"<b id=saved>${full / 2:,.2f}</b>" in html  # half price: the other half saved
    assert "of them batched" in html and "saved by batching" in html
    row = next(r for r in html.split("<tr>") if r.startswith(f"<td>{job.repo_full_name}</td>"))
    assert "<td class=n>1,000,000</td>" in row  # the batched tokens, apart


async def test_the_spend_is_read_ahead_at_start_and_refreshed_in_the_background(store) -> None:
    # Noon of today (UTC): the clock moves on by PAST_DAYS_SECONDS below and must stay on the same day, which a run
    # in the last ten minutes before midnight would not.
    now = [(time.time() // 86400) * 86400 + 43200]
    dashboard = Dashboard(store, token=TOKEN, prices=DEFAULT_PRICES, clock=lambda: now[0])
    app = web.Application()
    dashboard.register(app)
    client = TestClient(TestServer(app))
    await client.start_server()
    try:
        # Read and drawn when the process starts: no visitor waits for the 30 days' read.
        async def drawn() -> bool:
            return dashboard._summary is not None and dashboard._summary[2] is not None

        await eventually(drawn)
        await login(client)
        assert "<b>$0.00</b>" in await (await client.get("/dashboard/spend")).text()
        # Tokens of yesterday, then more than PAST_DAYS_SECONDS later (the same day): the page answers from the last
        # read at once, and a read in the background brings yesterday's tokens to the next answer.
        yesterday = now[0] - 86400
        job_id = await _admit(store, "octo/widgets", 1, sha(1), yesterday)
        [lease] = await store.claim(owner="w", limit=1, now=yesterday, lease_seconds=60)
        usage = Usage(MODEL, 1_000_000, 0, 0, 0)
        assert await store.complete_if_lease_held(lease, now=yesterday + 60, outcome="done", usage=usage)
        assert lease.job_id == job_id
        now[0] += PAST_DAYS_SECONDS + 1
        assert "<b>$0.00</b>" in await (await client.get("/dashboard/spend")).text()
        full = cost(
            DEFAULT_PRICES,
            MODEL,
            input_tokens=1_000_000,
            output_tokens=0,
            cache_creation_tokens=0,
            cache_read_tokens=0,
            batched=False,
        ).dollars
        assert full is not None

        async def shown() -> bool:
            return f"<b>${full:,.2f}</b>" in await (await client.get("/dashboard/spend")).text()

        await eventually(shown)
    finally:
        await client.close()


@pytest.mark.parametrize(
    "path",
    [
        "/dashboard/jobs?before=²",
        "/dashboard/jobs?pr=²",
        "/dashboard/jobs?pr=٣",
        "/dashboard/jobs?before=99999999999999999999999",
        "/dashboard/jobs?pr=99999999999999999999999",
        "/dashboard/jobs/9999999999999999999999999",
    ],
)
async def test_numeric_parameters_are_parsed_strictly_and_never_answer_500(dash, path: str) -> None:
    client, _, _ = dash
    await login(client)
    r = await client.get(path, allow_redirects=False)
    assert r.status in (200, 400, 404), (path, r.status)
    if "?pr=" in path:
        assert "is not a number" in await r.text()


def test_strict_id_takes_ascii_digits_in_64_bits_only() -> None:
    from reviewer_app.web.dashboard import strict_id

    assert [strict_id(t) for t in ("1", "42", str(2**63 - 1))] == [1, 42, 2**63 - 1]
    assert [strict_id(t) for t in ("", "0", "²", "٣", "-1", "1.0", " 1", str(2**63), "9" * 25)] == [None] * 9


async def test_wrong_tokens_are_throttled_per_address_with_retry_after(dash) -> None:
    client, _, _ = dash
    statuses = [(await login(client, "wrong-token-0000000000")).status for _ in range(6)]
    assert statuses == [401] * 5 + [429]
    r = await login(client)  # even the right token waits: the guesser does not learn it is right
    assert r.status == 429 and 1 <= int(r.headers["Retry-After"]) <= 61


def test_the_throttle_counts_per_address_and_overall_and_forgets_after_its_window() -> None:
    from reviewer_app.web.dashboard import LoginThrottle

    now = [1000.0]
    throttle = LoginThrottle(per_address=2, overall=3, window=60, clock=lambda: now[0])
    throttle.failed("a")
    throttle.failed("a")
    assert throttle.wait("a") == 60 and throttle.wait("b") == 0
    throttle.failed("b")
    assert throttle.wait("c") == 60  # three failures overall: everyone waits
    now[0] += 61
    assert throttle.wait("a") == throttle.wait("c") == 0


async def test_logout_ends_the_session_on_the_server_and_a_copied_cookie_with_it(dash) -> None:
    client, _, _ = dash
    r = await login(client)
    copied = r.cookies[COOKIE].value
    assert (await client.post("/dashboard/logout", allow_redirects=False)).status == 303
    client.session.cookie_jar.update_cookies({COOKIE: copied})  # the cookie someone copied before the logout
    assert (await client.get("/dashboard", allow_redirects=False)).status == 303
    await login(client)  # a new login works again
    assert (await client.get("/dashboard", allow_redirects=False)).status == 200


async def test_cookies_can_be_forced_secure_and_are_unless_the_app_is_on_loopback(store) -> None:
    from reviewer_app.settings.config import cookies_secure, load_config

    env = {"GITHUB_WEBHOOK_SECRET": "s"}
    assert cookies_secure(load_config(env)) is True  # 0.0.0.0: reached from elsewhere, through TLS
    assert cookies_secure(load_config({**env, "HOST": "127.0.0.1"})) is False
    assert cookies_secure(load_config({**env, "HOST": "127.0.0.1", "REVIEWER_SECURE_COOKIES": "on"})) is True
    with pytest.raises(ValueError, match="REVIEWER_SECURE_COOKIES"):
        load_config({**env, "REVIEWER_SECURE_COOKIES": "maybe"})
    app = web.Application()
    Dashboard(store, token=TOKEN, prices={}, secure_cookies=True).register(app)
    async with TestClient(TestServer(app)) as client:
        r = await login(client)  # plain http, no X-Forwarded-Proto: Secure all the same
        assert "Secure" in r.headers["Set-Cookie"]


async def test_the_spend_page_shows_what_the_verification_of_findings_cost(dash) -> None:
    client, seeded, store = dash
    await login(client)
    html = await (await client.get("/dashboard/spend")).text()
    assert "<b id=verify>$0.00</b>" in html and "of it verification" in html
    now = time.time()
    spec = JobSpec(repo_id=6, repo_full_name="octo/verified", installation_id=7, pr_number=1, head_sha=sha("v"))
    await store.admit(Delivery("spend-verify", "pull_request", "opened"), Enqueue(spec), now=now, max_attempts=3)
    [lease] = [le for le in await store.claim(owner="w", limit=10, now=now, lease_seconds=60) if le.job.repo_id == 6]
    verifier = "claude-haiku-4-5"
    await store.record_usage_if_lease_held(lease, Usage(verifier, 1_000_000, 0, 0, 0, kind=VERIFICATION))
    await store.complete_if_lease_held(lease, now=now, outcome="done", usage=Usage(MODEL, 1_000_000, 0, 0, 0))
    verify_cost = cost(
        DEFAULT_PRICES,
        verifier,
        input_tokens=1_000_000,
        output_tokens=0,
        cache_creation_tokens=0,
        cache_read_tokens=0,
        batched=False,
    ).dollars
    assert verify_cost is not None and verify_cost > 0
    html = await (await client.get("/dashboard/spend")).text()
    assert f"<b id=verify>${verify_cost:,.2f}</b>" in html
    row = next(r for r in html.split("<tr>") if r.startswith("<td>octo/verified</td>"))
    assert "<td class=n>2,000,000</td>" in row and f"<td class=n>${verify_cost:,.2f}</td>" in row
    usage = {r["kind"]: r for r in await store.usage_by_repo(since=now - 1) if r["repo"] == "octo/verified"}
    assert (usage["verification"]["model"], usage["verification"]["input_tokens"]) == (verifier, 1_000_000)
    assert usage["reviews"]["model"] == MODEL


async def test_the_header_shows_the_version_to_those_signed_in_only(dash) -> None:
    from reviewer_app import __version__

    client, _, _ = dash
    before = await (await client.get("/dashboard/login")).text()
    assert f"title=version>{__version__}<" not in before
    await login(client)
    assert f"<span class=muted title=version>{__version__}</span>" in await (await client.get("/dashboard")).text()
