"""`reviewer-app review` with LOG_LEVEL=DEBUG through Amazon Bedrock (the fake's SigV4 endpoint, the real SDK and
botocore): no credential reaches the log. Third-party loggers stay at WARNING unless REVIEWER_DEBUG_LOGGERS names
them, and what a named one logs (botocore's canonical request, with its headers) is masked all the same."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakes.github import FakeGitHub
from tests.fakes.platforms import AWS_SECRET_KEY, FakeBedrock
from tests.fakes.threads import FakesThread
from tests.review.test_review_command import ANSWER, PERSON, REPO, SOURCE, World, logging_as_it_was

SESSION_TOKEN = "IQoJb3JpZ2luX2VjEFAKE-session-token/for+tests0123456789"
GATEWAY_SECRET = "gw-secret-7d1e9a40"

__all__ = ["logging_as_it_was"]  # the fixture that gives the process's logging back after each test


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    github, bedrock = FakeGitHub(), FakeBedrock()
    github.add_repo(REPO, github.add_installation().id)
    github.set_permission(REPO, PERSON, "read")
    github.add_pull(REPO, 1, files=[SOURCE], title="Add widgets", body="Adds five widgets.")
    token = github.add_user_token(PERSON)
    bedrock.script_tool_answer(ANSWER)
    for name in ("AWS_PROFILE", "AWS_DEFAULT_REGION", "AWS_BEARER_TOKEN_BEDROCK"):
        monkeypatch.delenv(name, raising=False)
    with FakesThread(github, bedrock) as fakes:
        yield World(fakes, token, tmp_path, monkeypatch)


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
