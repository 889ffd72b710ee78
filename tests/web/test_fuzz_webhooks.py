"""Fuzzing the webhook endpoint: thousands of mutated deliveries over loopback HTTP, and never a 5xx.

Each delivery starts from a real-looking payload of an event the app handles, is mutated (fields dropped, retyped,
replaced by odd values), and is mostly signed correctly so it reaches the decision code and the store; the headers
(event name, delivery id, signature, content type) are mutated too. The store is up throughout, so even a 503 is a
bug. Examples are derandomised on CI (see tests/conftest.py) and their number is fixed, so the cost is too.
"""

from __future__ import annotations

import copy
import json
import os
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reviewer_app.core.admission import Guard
from reviewer_app.metrics import Metrics
from reviewer_app.web.app import WEBHOOK_PATH, make_app
from reviewer_app.web.events import make_router
from reviewer_app.web.webhooks import Receiver
from tests.helpers import SECRET, pr_payload, sha, sign
from tests.payloads import (
    check_run_event,
    check_suite_event,
    installation_event,
    installation_repositories_event,
    issue_comment_event,
    repository_entry,
)

APP_ID = 4242
SLUG = "reviewer-app"
# Per store backend; REVIEWER_TEST_FUZZ_EXAMPLES=50000 digs deeper on a developer's machine.
EXAMPLES = int(os.environ.get("REVIEWER_TEST_FUZZ_EXAMPLES", "1000"))

WIDGETS = [repository_entry("octo/widgets", 1001)]


def comment_payload(body: str) -> dict[str, Any]:
    return issue_comment_event(body)


def rerun_payload(event: str) -> dict[str, Any]:
    if event == "check_suite":
        return check_suite_event(head_sha=sha(1))
    return check_run_event(head_sha=sha(1), external_id="reviewer-app-job-1")


def installation_payload(action: str) -> dict[str, Any]:
    return installation_event(action, account="octo", repositories=WIDGETS)


def repositories_payload(action: str) -> dict[str, Any]:
    return installation_repositories_event(action, account="octo", removed=WIDGETS)


COMMENT_BODIES = [
    "/review",
    "/review full",
    "/review pause",
    "/review resume",
    "/review help",
    "/review frobnicate",
    "@reviewer-app review",
    "@reviewer-app[bot] full",
    "thanks!",
    "```\n/review\n```",
    "/review x` @octocat [click](https://evil.example) `",
    "/review é\x00\u200b",
]

# (event, payload) pairs as GitHub sends them.
BASES = st.one_of(
    st.sampled_from(["opened", "synchronize", "reopened", "ready_for_review", "closed", "edited", "labeled"]).map(
        lambda action: ("pull_request", pr_payload(action=action, head=sha(2)))
    ),
    st.sampled_from(COMMENT_BODIES).map(lambda body: ("issue_comment", comment_payload(body))),
    st.sampled_from(["check_run", "check_suite"]).map(lambda event: (event, rerun_payload(event))),
    st.sampled_from(["created", "deleted", "suspend", "unsuspend", "new_permissions_accepted"]).map(
        lambda action: ("installation", installation_payload(action))
    ),
    st.sampled_from(["removed", "added"]).map(
        lambda action: ("installation_repositories", repositories_payload(action))
    ),
    st.just(("ping", {"zen": "Design for failure.", "hook_id": 1, "hook": {"type": "App", "app_id": APP_ID}})),
)
EVENTS = [
    "pull_request",
    "issue_comment",
    "check_run",
    "check_suite",
    "installation",
    "installation_repositories",
    "ping",
    "push",
    "star",
]

# Values that have broken parsers before: wrong types, edge integers, empty and odd strings.
ODD = st.sampled_from(
    [
        None,
        True,
        False,
        0,
        -1,
        1,
        2**31,
        2**63 - 1,
        2**63,
        2**64 - 1,
        -(2**63),
        1.5,
        "",
        "0",
        "1",
        "\x00",
        "a\x00b",
        "é",
        "\ud7ff",
        "x" * 5000,
        [],
        {},
        [{}],
        [None],
        {"id": None},
    ]
)
EDGE = {
    int: st.sampled_from([2**63 - 1, 2**63, 2**64 - 1, -(2**63), -(2**63) - 1, 0, -1]),
    str: st.sampled_from(["", "a\x00b", "\x00", " ", "é" * 300, "x" * 100_000, "../..", "%00"]),
    bool: st.booleans(),
}
LEAF = st.one_of(ODD, st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=20))
JSON = st.recursive(
    LEAF,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
# Header text: printable ASCII and a few characters outside it.
HEADER_TEXT = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E) | st.sampled_from("éü€\u200b"), max_size=60)


def paths(node: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield prefix
    if isinstance(node, dict):
        for key, value in node.items():
            yield from paths(value, (*prefix, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from paths(value, (*prefix, index))


def mutate(data: st.DataObject, payload: Any) -> Any:
    """``payload`` with one field deleted, replaced, wrapped or turned into a string (drawn values are copied: the
    odd ones are shared constants, and a later mutation must not change them)."""
    # A depth first, then a field at that depth: the few top-level objects the decisions read are hit as often as
    # the many leaves.
    by_depth: dict[int, list[tuple[Any, ...]]] = {}
    for found in paths(payload):
        by_depth.setdefault(len(found), []).append(found)
    depth = data.draw(st.sampled_from(sorted(by_depth)), label="depth")
    path = data.draw(st.sampled_from(by_depth[depth]), label="path")
    op = data.draw(st.sampled_from(["replace", "odd", "edge", "delete", "wrap", "stringify"]), label="op")
    if not path:
        return copy.deepcopy(data.draw(JSON, label="root")) if op in ("replace", "odd", "delete") else [payload]
    parent = payload
    for key in path[:-1]:
        parent = parent[key]
    key, value = path[-1], parent[path[-1]]
    if op == "delete":
        del parent[key]
    elif op == "replace":
        parent[key] = copy.deepcopy(data.draw(JSON, label="value"))
    elif op == "odd":
        parent[key] = copy.deepcopy(data.draw(ODD, label="value"))
    elif op == "edge":  # the same type, at its edges: what a store column cannot hold
        parent[key] = copy.deepcopy(data.draw(EDGE.get(type(value), ODD), label="edge"))
    elif op == "wrap":
        parent[key] = data.draw(st.sampled_from([[value], {"value": value}]), label="wrapped")
    else:
        parent[key] = json.dumps(value)
    return payload


@st.composite
def deliveries(draw: st.DrawFn) -> tuple[bytes, dict[str, str]]:
    """Four in five are well-formed deliveries of a mutated payload, which reach the decisions and the store; the
    rest also tamper with the headers and the body."""
    data = draw(st.data())
    event, base = draw(BASES)
    payload: Any = copy.deepcopy(base)
    tamper = draw(st.sampled_from([False] * 4 + [True]), label="tamper")
    for _ in range(draw(st.integers(0 if tamper else 1, 4), label="mutations")):
        payload = mutate(data, payload)
    encoded = json.dumps(payload, ensure_ascii=draw(st.booleans())).encode()
    content_type = "application/json"
    if tamper:
        content_type = draw(
            st.sampled_from(
                [
                    "application/json",
                    "application/json; charset=utf-8",
                    "APPLICATION/JSON",
                    "application/x-www-form-urlencoded",
                    "text/plain",
                    "",
                    "multipart/form-data; boundary=x",
                    "application/json; charset=latin-1",
                ]
            ),
            label="content type",
        )
    body = urlencode({"payload": encoded.decode()}).encode() if "urlencoded" in content_type else encoded
    if tamper:
        how = draw(st.sampled_from(["as is", "truncated", "random", "empty"]), label="body")
        body = {"as is": body, "truncated": body[: len(body) // 2], "empty": b""}.get(how, b"")
        if how == "random":
            body = draw(st.binary(max_size=200), label="random body")
    good = sign(body)
    headers = {
        "Content-Type": content_type,
        "User-Agent": "GitHub-Hookshot/fuzz",
        "X-GitHub-Event": event,
        "X-Hub-Signature-256": good,
    }
    headers["X-GitHub-Delivery"] = draw(
        st.one_of(
            st.builds(lambda: str(uuid.uuid4())),
            st.sampled_from([f"dup-{n}" for n in range(5)]),
            HEADER_TEXT,
            st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=190, max_size=260),
        ),
        label="delivery",
    )
    if tamper:
        headers["X-GitHub-Event"] = draw(st.sampled_from([event, *EVENTS]) | HEADER_TEXT, label="event")
        headers["X-Hub-Signature-256"] = draw(
            st.sampled_from(
                [
                    good,
                    "sha256=é",
                    "sha1=" + good[7:47],
                    good.upper(),
                    good[:-1],
                    good + "0",
                    "",
                    "sha256=",
                    good.replace("=", " ="),
                ]
            )
            | HEADER_TEXT,
            label="signature",
        )
        for name in list(headers):
            if draw(st.integers(0, 10), label=f"drop {name}") == 0:
                del headers[name]
    return body, headers


@pytest.fixture
async def fuzz_client(store, aiohttp_client):
    receiver = Receiver(
        store=store,
        router=make_router(),
        secret=SECRET,
        max_body_bytes=64 * 1024,
        max_attempts=3,
        debounce_seconds=5,
        app_id=APP_ID,
        app_slug=SLUG,
        metrics=Metrics(),
        guard=Guard(reviews_per_day=50, manual_per_pr_hour=5),
    )
    return await aiohttp_client(make_app(receiver))


@settings(max_examples=EXAMPLES, suppress_health_check=list(HealthCheck))
@given(delivery=deliveries())
async def test_no_delivery_makes_the_server_answer_5xx(fuzz_client, delivery: tuple[bytes, dict[str, str]]) -> None:
    body, headers = delivery
    async with fuzz_client.post(WEBHOOK_PATH, data=body, headers=headers) as resp:
        text = await resp.text()
        assert resp.status < 500, (resp.status, text, headers, body[:2000])
        if resp.status < 300:
            assert isinstance(json.loads(text), dict)


# What the fuzz found, kept as plain regression tests.


async def deliver(client, event: str, payload: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    body = json.dumps(payload).encode()
    headers = {
        "Content-Type": "application/json",
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": str(uuid.uuid4()),
        "X-Hub-Signature-256": sign(body),
    }
    async with client.post(WEBHOOK_PATH, data=body, headers=headers) as resp:
        return resp.status, await resp.json()


def _with(payload: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    payload = copy.deepcopy(payload)
    node = payload
    *parents, last = path.split(".")
    for key in parents:
        node = node[key]
    node[last] = value
    return payload


async def test_an_installation_whose_account_is_not_an_object_is_still_tracked(fuzz_client) -> None:
    # Was a 500: the account's login was read with .get() on whatever the account was.
    status, answer = await deliver(
        fuzz_client, "installation", _with(installation_payload("created"), "installation.account", "octo")
    )
    assert status < 300 and answer["outcome"] == "installation"
    removed = _with(repositories_payload("removed"), "repositories_removed", True)
    status, answer = await deliver(fuzz_client, "installation_repositories", removed)
    assert status < 300 and answer["outcome"] == "cancelled"


@pytest.mark.parametrize(
    ("event", "payload"),
    [
        ("check_run", _with(rerun_payload("check_run"), "check_run.pull_requests", '[{"number": 1}]')),
        ("check_suite", _with(rerun_payload("check_suite"), "check_suite.pull_requests", [7])),
        ("pull_request", _with(pr_payload(head=sha(2)), "pull_request.base", "main")),
    ],
)
async def test_a_field_of_an_unforeseen_type_is_400_not_500(fuzz_client, caplog, event, payload) -> None:
    # Was a 500 (decide_rerun and decide_pull_request call .get() on these fields): the receiver answers 400 for any
    # field type a decision does not foresee, and logs the traceback as a bug to fix in the decision.
    status, answer = await deliver(fuzz_client, event, payload)
    assert status == 400 and "unexpected type" in answer["error"]
    assert any(r.levelname == "ERROR" and r.exc_info for r in caplog.records)


@pytest.mark.parametrize(
    ("path", "value", "why"),
    [
        ("repository.id", 2**63, "cannot be stored"),  # SQLite: OverflowError, a 500; PostgreSQL: a 503
        ("pull_request.number", 2**64 - 1, "cannot be stored"),
        ("installation.id", 2**63, "cannot be stored"),
        # PostgreSQL refuses NUL in text (was a 503); GitHub's formats, checked first, have no room for one.
        ("pull_request.head.sha", "abc\x00def", "pull_request.head.sha is not a commit SHA"),
        ("repository.full_name", "octo/\x00widgets", "repository.full_name is not a repository's OWNER/NAME"),
    ],
)
async def test_values_no_store_can_hold_are_400_not_5xx(fuzz_client, path: str, value: Any, why: str) -> None:
    status, answer = await deliver(fuzz_client, "pull_request", _with(pr_payload(head=sha(2)), path, value))
    assert status == 400 and why in answer["error"]


@pytest.mark.parametrize(
    ("event", "payload", "why"),
    [
        # Was 202, and `/review` by "" asked GitHub for collaborators//permission.
        ("issue_comment", _with(comment_payload("/review"), "comment.user.login", ""), "comment.user.login"),
        ("issue_comment", _with(comment_payload("/review"), "sender.login", ""), "sender.login"),
        ("issue_comment", _with(comment_payload("/review"), "comment.user.login", "a/../b"), "comment.user.login"),
        # Was 202, and 8 KB of emoji went into commits/{sha}/check-runs.
        ("pull_request", _with(pr_payload(head=sha(2)), "pull_request.head.sha", "😀" * 2048), "pull_request.head.sha"),
        ("pull_request", _with(pr_payload(head=sha(2)), "pull_request.head.sha", "g" * 40), "pull_request.head.sha"),
        ("pull_request", _with(pr_payload(head=sha(2)), "pull_request.head.sha", sha(2).upper()), "head.sha"),
        ("check_run", _with(rerun_payload("check_run"), "check_run.head_sha", "HEAD~1"), "check_run.head_sha"),
        ("pull_request", _with(pr_payload(head=sha(2)), "repository.full_name", "octo/widgets/.."), "full_name"),
        ("pull_request", _with(pr_payload(head=sha(2)), "repository.full_name", "octo/.."), "full_name"),
        ("pull_request", _with(pr_payload(head=sha(2)), "repository.full_name", "../widgets"), "full_name"),
        ("pull_request", _with(pr_payload(head=sha(2)), "pull_request.number", 0), "pull_request.number"),
        ("issue_comment", _with(comment_payload("/review"), "issue.number", -1), "issue.number"),
    ],
)
async def test_fields_that_reach_urls_are_held_to_githubs_formats(fuzz_client, store, event, payload, why) -> None:
    status, answer = await deliver(fuzz_client, event, payload)
    assert status == 400, answer
    error = answer["error"]
    assert why in error and "\n" not in error and len(error) < 120  # one line, naming the field, not quoting it
    assert await store.list_jobs(limit=10) == []


@pytest.mark.parametrize(
    ("path", "value"),
    [
        ("pull_request.head.sha", "ab" * 32),  # a SHA-256 repository's
        ("pull_request.user.login", "dependabot[bot]"),
        ("pull_request.user.login", "octo-cat_acme"),  # an Enterprise Managed User's
        ("repository.full_name", "octo-org/.github"),
        ("repository.full_name", "octo/w_i-d.gets"),
    ],
)
async def test_what_github_does_send_is_accepted(fuzz_client, path: str, value: Any) -> None:
    status, answer = await deliver(fuzz_client, "pull_request", _with(pr_payload(head=sha(2)), path, value))
    assert status == 202, answer
