"""The webhook receiver: verify, decide, commit, then answer; every bad input has a defined answer."""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import sqlite3
import time

import pytest

from reviewer_app.core.retry import RetryPolicy
from reviewer_app.core.states import JobState
from reviewer_app.core.timestamps import replay_reason
from reviewer_app.dispatch.context import JobContext
from reviewer_app.dispatch.dispatcher import Dispatcher
from reviewer_app.store.sqlite import SqliteStore
from reviewer_app.web.app import WEBHOOK_PATH, make_app
from reviewer_app.web.events import make_router
from reviewer_app.web.webhooks import Receiver
from tests.helpers import SECRET, encode, eventually, pr_payload, sha, webhook_headers
from tests.payloads import issue_comment_event, stamp


def receiver(store, *, secret: str | None = SECRET, max_body: int = 1024 * 1024, on_admitted=None) -> Receiver:
    return Receiver(
        store=store,
        router=make_router(),
        secret=secret,
        max_body_bytes=max_body,
        max_attempts=5,
        on_admitted=on_admitted,
    )


@pytest.fixture
async def client(aiohttp_client, sqlite_store):
    return await aiohttp_client(make_app(receiver(sqlite_store)))


async def post(client, payload, **kw):
    body = payload if isinstance(payload, bytes) else encode(payload)
    headers = kw.pop("headers", None) or webhook_headers(body, **kw)
    resp = await client.post(WEBHOOK_PATH, data=body, headers=headers)
    return resp.status, await resp.json()


async def test_signed_pull_request_is_committed_then_answered_202(client, sqlite_store) -> None:
    status, body = await post(client, pr_payload(head=sha(1)))
    assert status == 202 and body["outcome"] == "enqueued"
    job = await sqlite_store.get_job(body["job_id"])
    assert job.state == JobState.QUEUED and job.head_sha == sha(1) and job.installation_id == 77


async def test_same_delivery_and_same_revision_create_nothing_new(client, sqlite_store) -> None:
    body = encode(pr_payload(head=sha(1)))
    s1, b1 = await post(client, body, delivery="abc")
    s2, b2 = await post(client, body, delivery="abc")
    s3, b3 = await post(client, encode(pr_payload(action="reopened", head=sha(1))))
    assert (s1, s2, s3) == (202, 202, 202)
    assert b2["outcome"] == "duplicate-delivery" and b3["outcome"] == "duplicate-revision"
    assert b1["job_id"] == b2["job_id"] == b3["job_id"]
    assert len(await sqlite_store.list_jobs()) == 1


async def test_a_draft_is_queued_under_its_own_trigger_and_ready_for_review_gets_a_job(client, sqlite_store) -> None:
    # The worker decides with the repository's `drafts:` setting; ready_for_review of the same head is a new job.
    status, draft = await post(client, pr_payload(draft=True, head=sha(1)))
    assert status == 202 and draft["outcome"] == "enqueued"
    assert (await sqlite_store.get_job(draft["job_id"])).trigger == "draft"
    status, ready = await post(client, pr_payload(action="ready_for_review", head=sha(1)))
    assert status == 202 and ready["outcome"] == "enqueued" and ready["job_id"] != draft["job_id"]
    assert (await sqlite_store.get_job(ready["job_id"])).trigger == "auto"


async def test_closed_cancels_pending_jobs(client, sqlite_store) -> None:
    _, b = await post(client, pr_payload(head=sha(1)))
    status, body = await post(client, pr_payload(action="closed", state="closed"))
    assert status == 202 and body["cancelled"] == [b["job_id"]]
    assert (await sqlite_store.get_job(b["job_id"])).state == JobState.CANCELLED


async def test_newer_head_supersedes_and_names_the_new_job(client, sqlite_store) -> None:
    _, b1 = await post(client, pr_payload(head=sha(1), updated_at="2026-12-01T10:00:00Z"))
    _, b2 = await post(client, pr_payload(action="synchronize", head=sha(2), updated_at="2026-12-01T10:01:00Z"))
    assert b2["superseded"] == [b1["job_id"]]
    old = await sqlite_store.get_job(b1["job_id"])
    assert old.state == JobState.SUPERSEDED and old.superseded_by == b2["job_id"]


@pytest.mark.parametrize("signature", [None, "sha256=" + "0" * 64, "sha1=abc", "garbage"])
async def test_missing_or_wrong_signature_is_401_and_stores_nothing(client, sqlite_store, signature) -> None:
    body = encode(pr_payload())
    headers = webhook_headers(body, secret=None)
    if signature:
        headers["X-Hub-Signature-256"] = signature
    status, _ = await post(client, body, headers=headers)
    assert status == 401
    assert await sqlite_store.list_jobs() == []


def _hmac(body: bytes, digest: str) -> str:
    return hmac.new(SECRET.encode(), body, digest).hexdigest()


@pytest.mark.parametrize(
    "make_header",
    [
        lambda body: "sha256=é",  # was a 500 with a traceback (hmac.compare_digest refuses non-ASCII text)
        lambda body: "sha256=" + _hmac(body, "sha256")[:-1] + "é",
        lambda body: "sha1=" + _hmac(body, "sha1"),  # a valid SHA-1 HMAC in the SHA-256 header was accepted
        lambda body: "sha256=" + _hmac(body, "sha256") + "00",
        lambda body: "sha256=" + _hmac(body, "sha256")[:63],
        lambda body: "sha256=0x" + _hmac(body, "sha256")[2:],
        lambda body: "SHA256=" + _hmac(body, "sha256"),
        lambda body: "sha256=" + _hmac(body, "sha256") + ",sha256=" + "0" * 64,
    ],
    ids=["non-ascii", "non-ascii-tail", "sha1", "too-long", "too-short", "0x", "upper-prefix", "two-values"],
)
async def test_a_malformed_signature_is_401_logged_once_without_a_traceback(
    client, sqlite_store, caplog, make_header
) -> None:
    body = encode(pr_payload())
    headers = webhook_headers(body, secret=None)
    headers["X-Hub-Signature-256"] = make_header(body)
    caplog.set_level(logging.INFO)
    status, answer = await post(client, body, headers=headers)
    assert status == 401 and "signature" in answer["error"].lower()
    assert await sqlite_store.list_jobs() == []
    refusals = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(refusals) == 1 and refusals[0].name == "reviewer_app.web.webhooks", refusals
    assert refusals[0].exc_info is None and "401" in refusals[0].getMessage()


async def test_a_signature_in_upper_case_hex_is_accepted(client) -> None:
    body = encode(pr_payload())
    headers = webhook_headers(body, secret=None)
    headers["X-Hub-Signature-256"] = "sha256=" + _hmac(body, "sha256").upper()
    status, _ = await post(client, body, headers=headers)
    assert status == 202


async def test_sha1_signature_alone_is_not_accepted(client) -> None:
    body = encode(pr_payload())
    headers = webhook_headers(body, secret=None)
    headers["X-Hub-Signature"] = "sha1=" + _hmac(body, "sha1")
    status, _ = await post(client, body, headers=headers)
    assert status == 401


@pytest.mark.parametrize("missing", ["X-GitHub-Event", "X-GitHub-Delivery"])
async def test_missing_event_headers_are_400(client, sqlite_store, missing) -> None:
    body = encode(pr_payload())
    headers = webhook_headers(body)
    del headers[missing]
    status, body = await post(client, body, headers=headers)
    assert status == 400 and missing in body["error"]
    assert await sqlite_store.list_jobs() == []


@pytest.mark.parametrize("raw", [b"[1, 2, 3]", b"not json", b'"a string"', b"", b"\xff\xfe"])
async def test_body_that_is_not_a_json_object_is_400(client, sqlite_store, raw) -> None:
    status, body = await post(client, raw, as_github_sends=False)
    assert status == 400 and "JSON object" in body["error"]


async def test_payload_missing_required_fields_is_400(client, sqlite_store) -> None:
    p = pr_payload()
    del p["pull_request"]["head"]
    status, body = await post(client, p, as_github_sends=False)
    assert status == 400 and "head" in body["error"]
    assert await sqlite_store.list_jobs() == []


async def test_unhandled_event_or_action_is_2xx_with_reason_and_nothing_queued(client, sqlite_store) -> None:
    s1, b1 = await post(client, {"zen": "hi"}, event="star", as_github_sends=False)  # no star body the app reads
    s2, b2 = await post(client, pr_payload(action="labeled"))
    assert s1 == 200 and "not handled" in b1["reason"]
    assert s2 == 200 and "labeled" in b2["reason"]
    assert await sqlite_store.list_jobs() == []


async def test_body_over_the_limit_is_413_without_reading_it(aiohttp_client, sqlite_store) -> None:
    client = await aiohttp_client(make_app(receiver(sqlite_store, max_body=4096)))
    big = encode(pr_payload(padding=1000))
    status, body = await post(client, big)
    assert status == 413

    async def chunks():
        for _ in range(100):
            yield b"x" * 1024

    headers = webhook_headers(b"", delivery="chunked", as_github_sends=False)  # the body is 100 KB of "x"
    resp = await client.post(WEBHOOK_PATH, data=chunks(), headers=headers)
    assert resp.status == 413
    assert await sqlite_store.list_jobs() == []


async def test_database_refusing_the_write_is_503_and_the_app_stays_up(aiohttp_client, tmp_path) -> None:
    path = str(tmp_path / "locked.db")
    store = SqliteStore(path, busy_timeout_ms=100)
    await store.open()
    client = await aiohttp_client(make_app(receiver(store)))
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN EXCLUSIVE")
    try:
        status, body = await post(client, pr_payload(head=sha(1)))
        assert status == 503 and "could not be stored" in body["error"]
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert await store.list_jobs() == []
    status, body = await post(client, pr_payload(head=sha(1)))
    assert status == 202 and body["outcome"] == "enqueued"
    resp = await client.get("/healthz")
    assert resp.status == 200
    await store.close()


async def test_insecure_development_mode_accepts_unsigned(aiohttp_client, sqlite_store) -> None:
    client = await aiohttp_client(make_app(receiver(sqlite_store, secret=None)))
    status, body = await post(client, pr_payload(), secret=None)
    assert status == 202


async def test_three_pushes_while_slots_are_busy_only_newest_runs(aiohttp_client, sqlite_store) -> None:
    ran: list[str] = []
    release = asyncio.Event()

    async def runner(ctx: JobContext) -> str:
        ran.append(ctx.job.head_sha)
        await release.wait()
        return "reviewed"

    d = Dispatcher(
        sqlite_store,
        runner,
        owner="w",
        concurrency=1,
        lease_seconds=5,
        renew_interval=1,
        scan_interval=0.05,
        retry_policy=RetryPolicy(),
        clock=time.time,
    )
    client = await aiohttp_client(make_app(receiver(sqlite_store, on_admitted=lambda r: d.wake())))
    d.start()
    _, busy = await post(client, pr_payload(number=99, head=sha("busy")))
    await eventually(lambda: asyncio.sleep(0, bool(ran)))
    bodies = []
    for i, minute in zip(range(1, 4), ("01", "02", "03"), strict=True):
        _, b = await post(
            client, pr_payload(action="synchronize", head=sha(i), updated_at=f"2026-12-01T10:{minute}:00Z")
        )
        bodies.append(b)
    release.set()
    await eventually(lambda: _state(sqlite_store, bodies[2]["job_id"], JobState.SUCCEEDED))
    assert ran == [sha("busy"), sha(3)]
    for b in bodies[:2]:
        assert (await sqlite_store.get_job(b["job_id"])).state == JobState.SUPERSEDED
    await d.stop(1)


async def _state(store, job_id, state) -> bool:
    return (await store.get_job(job_id)).state == state


async def test_health(client) -> None:
    resp = await client.get("/healthz")
    assert resp.status == 200 and json.loads(await resp.text()) == {"status": "ok"}


async def test_form_encoded_payloads_are_accepted_too(client, sqlite_store) -> None:
    from urllib.parse import urlencode

    body = urlencode({"payload": encode(pr_payload(head=sha(7))).decode()}).encode()
    headers = webhook_headers(body, as_github_sends=False)  # form-encoded: the JSON inside is pr_payload's
    headers["Content-Type"] = "application/x-www-form-urlencoded"
    status, answer = await post(client, body, headers=headers)
    assert status == 202 and (await sqlite_store.get_job(answer["job_id"])).head_sha == sha(7)


async def test_a_signed_delivery_replayed_after_the_delivery_window_is_ignored(aiohttp_client, sqlite_store) -> None:
    # Deliveries are remembered for the retention window; a captured body sent again after it would pass the
    # duplicate check and buy a second review of a head already reviewed.
    month = 30 * 86400
    rx = receiver(sqlite_store)
    rx.replay_window_seconds = month
    client = await aiohttp_client(make_app(rx))
    old = pr_payload(head=sha(1), updated_at=stamp(-month - 3600))
    status, body = await post(client, old)
    assert status == 200 and body["outcome"] == "ignored" and "a replay" in body["reason"]
    assert await sqlite_store.list_jobs() == []
    comment = issue_comment_event("/review")
    comment["comment"]["created_at"] = stamp(-month - 3600)
    status, body = await post(client, comment, event="issue_comment")
    assert status == 200 and "a replay" in body["reason"]
    status, body = await post(client, pr_payload(head=sha(2), updated_at=stamp(-month + 3 * 3600)))
    assert status == 202 and body["outcome"] == "enqueued", body  # inside the window: a late delivery, not a replay


def test_only_events_that_carry_their_own_time_are_taken_for_replays() -> None:
    now, window = 10_000_000.0, 86400.0
    old = "1970-01-02T00:00:00Z"
    assert replay_reason("pull_request", {"pull_request": {"updated_at": old}}, now=now, window_seconds=window)
    assert replay_reason("issue_comment", {"comment": {"created_at": old}}, now=now, window_seconds=window)
    # A Re-run's check run and an installation keep old timestamps of their own: never replays by age.
    assert replay_reason("check_run", {"check_run": {"completed_at": old}}, now=now, window_seconds=window) is None
    assert replay_reason("installation", {"installation": {"updated_at": old}}, now=now, window_seconds=window) is None
    assert replay_reason("pull_request", {"pull_request": {"updated_at": old}}, now=now, window_seconds=0) is None
    assert replay_reason("pull_request", {"pull_request": {}}, now=now, window_seconds=window) is None


async def test_a_webhook_body_sent_too_slowly_is_answered_408_and_nothing_is_stored(
    aiohttp_client, sqlite_store
) -> None:
    rx = receiver(sqlite_store)
    rx.body_timeout_seconds = 0.3
    client = await aiohttp_client(make_app(rx))
    body = encode(pr_payload(head=sha(1)))
    headers = webhook_headers(body)
    head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    reader, writer = await asyncio.open_connection("127.0.0.1", client.server.port)
    writer.write(f"POST {WEBHOOK_PATH} HTTP/1.1\r\nHost: x\r\n{head}Content-Length: {len(body)}\r\n\r\n".encode())
    writer.write(body[:10])  # and the rest never comes
    answer = await asyncio.wait_for(reader.readuntil(b"\r\n"), timeout=10)
    assert answer.startswith(b"HTTP/1.1 408")
    writer.close()
    assert await sqlite_store.list_jobs() == []
