"""Logs: a review followed end to end is a trail of JSON lines that name the job, and never carry a secret."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest

from reviewer_app.core.states import JobState
from reviewer_app.logs import setup_logging
from tests.harness import REPO, SOURCE, harness
from tests.helpers import SECRET

JOB_FIELDS = ("delivery", "job_id", "repo", "pr", "head_sha", "attempt")


@pytest.fixture
def log_stream() -> Iterator[io.StringIO]:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    stream = io.StringIO()
    try:
        yield stream
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)


async def test_a_review_logs_json_lines_with_its_context_and_no_secret(tmp_path, log_stream) -> None:
    async with harness(tmp_path, LOG_FORMAT="json", LOG_LEVEL="DEBUG") as h:
        setup_logging(h.svc.cfg.log_level, h.svc.cfg.log_format, stream=log_stream)
        # A revoked token and a 502 on the first read: the runner logs from deep inside the GitHub client too.
        h.github.inject("GET", r"/pulls/\d+$", "unauthorized", times=1)
        h.github.inject("GET", r"/pulls/\d+/files", "error", status=502, times=1)
        pull = h.github.add_pull(REPO, 1, files=[SOURCE])
        answer = await h.deliver("pull_request", h.pr_payload(pull), delivery="delivery-7f3a")
        job_id = answer["job_id"]
        await h.wait_state(job_id, JobState.SUCCEEDED)
        await h.wait_check_synced(job_id)
        secrets = [SECRET, "sk-ant-test-key", h.github.private_key, *h.github.issued_tokens]
        assert len(h.github.issued_tokens) >= 2  # the revoked one and its replacement

    text = log_stream.getvalue()
    lines = [json.loads(line) for line in text.splitlines()]  # every line is one JSON object
    assert all({"ts", "level", "logger", "msg"} <= line.keys() for line in lines)
    expected = {
        "delivery": "delivery-7f3a",
        "job_id": job_id,
        "repo": REPO,
        "pr": 1,
        "head_sha": pull.head_sha,
        "attempt": 1,
    }

    def of_job(line: dict) -> dict:
        return {k: line.get(k) for k in JOB_FIELDS}

    [admitted] = [ln for ln in lines if ln["logger"] == "reviewer_app.web.webhooks"]
    assert {k: admitted.get(k) for k in ("delivery", "job_id", "repo", "pr", "head_sha")} == {
        k: expected[k] for k in ("delivery", "job_id", "repo", "pr", "head_sha")
    }
    in_job = [ln for ln in lines if "attempt" in ln]
    messages = " | ".join(ln["msg"] for ln in in_job)
    assert f"job {job_id} attempt 1 started" in messages and f"job {job_id} succeeded" in messages
    assert "review answered" in messages  # logged by the Claude adapter, which knows nothing of jobs
    assert "renewing the installation token" in messages and "HTTP 502" in messages  # the GitHub client's
    assert all(of_job(ln) == expected for ln in in_job), [ln for ln in in_job if of_job(ln) != expected]

    for secret in secrets:
        assert secret and secret not in text
    assert "-----BEGIN" not in text and "sk-ant" not in text
