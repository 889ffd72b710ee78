"""What `reviewer-app review` writes to a terminal is confined: the review printed without the escape sequences and
control characters a file name or the model put in it (core/terminal.py); and with LOG_LEVEL=DEBUG through Amazon
Bedrock (the fake's SigV4 endpoint, the real SDK and botocore) no credential reaches the log. Third-party loggers stay
at WARNING unless REVIEWER_DEBUG_LOGGERS names them, and what a named one logs (botocore's canonical request, with
its headers) is masked all the same."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from anthropic.lib.aws._auth import _get_session

from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.github import FakeGitHub, added_file
from tests.fakes.platforms import AWS_SECRET_KEY, FakeBedrock
from tests.fakes.threads import FakesThread
from tests.review.test_review_command import ANSWER, PERSON, REPO, SOURCE, World, logging_as_it_was

SESSION_TOKEN = "IQoJb3JpZ2luX2VjEFAKE-session-token/for+tests0123456789"
GATEWAY_SECRET = "gw-secret-7d1e9a40"

__all__ = ["logging_as_it_was"]  # the fixture that gives the process's logging back after each test


# A file name as git allows it (any byte but NUL and "/"): an OSC 8 hyperlink around it, erase line, cursor up.
TRAPPED = "src/\x1b]8;;https://evil.example/\x1b\\wid\x1b[2K\x1b[1Aget\x1b]8;;\x1b\\.py"
TRAPPED_SOURCE = added_file(TRAPPED, [line for i in range(1, 6) for line in (f"def f{i}():", f"    return {i}")])
TRAPPED_ANSWER = {
    "summary": "Clean\x1b[2J\x9b31m up\x85 the \x1b]0;pwned\x07widgets.",
    "comments": [
        {
            "path": TRAPPED,
            "line": 4,
            "side": "RIGHT",
            "severity": "warning",
            "body": "f2 returns\x9d8;;https://evil.example/\x9c a constant\r.",
        }
    ],
}


def make_world(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, model: FakeAnthropic, source: dict[str, Any], answer: Any
) -> Iterator[World]:
    github = FakeGitHub()
    github.add_repo(REPO, github.add_installation().id)
    github.set_permission(REPO, PERSON, "read")
    github.add_pull(REPO, 1, files=[source], title="Add widgets", body="Adds five widgets.")
    token = github.add_user_token(PERSON)
    model.script_tool_answer(answer)
    for name in ("AWS_PROFILE", "AWS_DEFAULT_REGION", "AWS_BEARER_TOKEN_BEDROCK"):
        monkeypatch.delenv(name, raising=False)
    with FakesThread(github, model) as fakes:
        yield World(fakes, token, tmp_path, monkeypatch)


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    # The SDK keeps one boto3 session per (keys, token, region, profile) it was given, and given none (credentials from
    # the environment) an earlier test's session, whose credentials were resolved without this test's session token.
    _get_session.cache_clear()
    yield from make_world(tmp_path, monkeypatch, FakeBedrock(), SOURCE, ANSWER)
    _get_session.cache_clear()


@pytest.fixture
def trapped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    yield from make_world(tmp_path, monkeypatch, FakeAnthropic(), TRAPPED_SOURCE, TRAPPED_ANSWER)


def clean(text: str) -> bool:
    """No escape and no control character but newline and tab."""
    return not any(ord(c) < 0x20 and c not in "\n\t" or 0x7F <= ord(c) <= 0x9F for c in text)


@pytest.mark.parametrize("as_json", [False, True])
def test_a_file_name_and_model_text_are_printed_without_their_escapes(trapped: World, capsys, as_json: bool) -> None:
    status, out, err = trapped.review(trapped.url, *(["--json"] if as_json else []), capsys=capsys)
    assert status == 0, err
    assert clean(out) and clean(err)
    if as_json:
        report = json.loads(out)  # JSON escapes them: the terminal sees "\u001b", the script gets the real name
        assert report["findings"][0]["path"] == TRAPPED
    else:
        # The file name and the finding read as their plain text; the hyperlinks' addresses are gone with them. (What
        # is left of an escape the review's own neutraliser took apart for GitHub, "[2J", is inert text.)
        assert "#### `src/widget.py` line 4" in out
        assert "widgets." in out and "f2 returns a constant" in out
        assert "evil.example" not in out


@pytest.mark.parametrize("asked", ["", "botocore"])
def test_debug_logs_through_bedrock_carry_no_credential(world: World, capsys, asked: str) -> None:
    bedrock = world.anthropic
    assert isinstance(bedrock, FakeBedrock)
    env = world.env(
        REVIEWER_MODEL_PROVIDER="bedrock",
        LOG_LEVEL="DEBUG",
        ANTHROPIC_CUSTOM_HEADERS=f"X-Gateway-Key: {GATEWAY_SECRET}",
        AWS_SESSION_TOKEN=SESSION_TOKEN,
        REVIEWER_DEBUG_LOGGERS=asked,
        **bedrock.client_environment(world.tmp_path),
    )
    status, out, err = world.review(world.url, capsys=capsys, env=env)
    assert status == 0, err
    assert "f2 returns a constant." in out
    request = bedrock.message_requests[0]  # the review (the verification pass asks too)
    assert request.headers["x-amz-security-token"] == SESSION_TOKEN  # the credentials were really sent
    assert request.headers["x-gateway-key"] == GATEWAY_SECRET
    assert " INFO reviewer_app." in err  # our own lines are there
    for secret in (SESSION_TOKEN, GATEWAY_SECRET, AWS_SECRET_KEY, world.token, "sk-ant-test"):
        assert secret not in err
    if asked:
        # botocore heard, as asked: its canonical request names the headers, their values masked.
        assert " DEBUG botocore." in err
        assert "x-amz-security-token:***" in err and "x-gateway-key:***" in err
    else:
        assert "botocore" not in err and " DEBUG anthropic" not in err and " DEBUG httpx" not in err
