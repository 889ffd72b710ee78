"""Which reviews go through Anthropic's Message Batches (half price, answered within 24 hours): a pure decision."""

from __future__ import annotations

import re
from dataclasses import dataclass

from reviewer_app.core.admission import AUTOMATIC_TRIGGERS, TRIGGER_RETARGET

WAITING_PREFIX = "waiting for Message Batch"  # how a deferred job's last_error starts while it waits on a batch
SWEEP_ACTION = "sweep"  # details["action"] of a job the sweep of open pull requests admitted
# Results of a batched request, as the API reports them; only "succeeded" carries an answer. Every other one (and a
# succeeded answer that does not fit the review tool) is asked again interactively.
SUCCEEDED = "succeeded"
RESULT_TYPES = frozenset({SUCCEEDED, "errored", "canceled", "expired"})
_CUSTOM_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")  # what the API accepts as a request's custom_id


@dataclass(frozen=True)
class BatchPolicy:
    """The operator's settings: batching on or off, and the wait after which an automatic job is batched (0: never
    for waiting alone)."""

    enabled: bool = True
    after_seconds: float = 0.0


def batch_reason(
    *,
    trigger: str,
    action: str | None,
    repo_batch: bool | None,
    waited_seconds: float,
    tools: bool,
    policy: BatchPolicy,
) -> str | None:
    """Why this job's model requests go through Message Batches, or None: it asks interactively.

    Someone waits for a requested review (`/review`, Re-run) and for a reply, so those are never batched. Work that
    can wait is: a head the sweep found (no webhook brought it, nobody is watching the minute), a repository that
    asks for it (``batch: true``), and an automatic job that has already waited past the operator's threshold (a
    backlog after an outage). ``batch: false`` keeps a repository's reviews interactive. A review that may read the
    repository (tools) needs several turns, which a batch cannot hold, so it stays interactive.
    """
    automatic = trigger in AUTOMATIC_TRIGGERS or trigger.startswith(TRIGGER_RETARGET)
    if not policy.enabled or not automatic or repo_batch is False or tools:
        return None
    if action == SWEEP_ACTION:
        return "found by the sweep"
    if repo_batch:
        return "the repository asks for batch reviews"
    if policy.after_seconds > 0 and waited_seconds >= policy.after_seconds:
        return f"waited {waited_seconds:.0f} s (over {policy.after_seconds:g} s)"
    return None


def custom_id(job_id: int, part_key: str) -> str:
    """The request's name in its batch: one per job and part, so a result finds its way back."""
    name = f"job-{job_id}-{part_key}"
    if not _CUSTOM_ID.match(name):
        raise ValueError(f"not a valid custom_id: {name!r}")
    return name
