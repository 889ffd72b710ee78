"""Tokens as narrow as the work: which of the App's permissions each kind of work needs, and which kind of work the
running code is doing. Pure but for one context variable.

An installation token is minted for one repository (``repositories``) and the permissions of one kind of work
(``permissions``), so a job that a pull request steers can never touch another repository of the installation, nor
do what its kind of work never does. docs/security.md lists every App permission and what needs it.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
from collections.abc import Awaitable, Callable, Iterator, Mapping
from types import MappingProxyType
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Awaitable[Any]])

# GitHub's permission names and levels, as the App manifest asks for them (app-manifest.yml).
APP_PERMISSIONS: Mapping[str, str] = MappingProxyType(
    {"pull_requests": "write", "checks": "write", "contents": "read", "issues": "write", "metadata": "read"}
)

WORK_PERMISSIONS: Mapping[str, Mapping[str, str]] = MappingProxyType(
    {
        # Read the PR, its files, threads and the code around them; post the review; resolve the app's threads;
        # its check run; react to the /review comment that asked for it.
        "review": APP_PERMISSIONS,
        # Read the thread and the code it is about; reply in it (or on the conversation). No check runs.
        "answer": MappingProxyType(
            {"pull_requests": "write", "issues": "write", "contents": "read", "metadata": "read"}
        ),
        # The sweep finds heads with no review: it reads pull requests, reviews and check runs, and writes nothing.
        "sweep": MappingProxyType({"pull_requests": "read", "checks": "read", "metadata": "read"}),
        # The check-run sync: check runs only.
        "checks": MappingProxyType({"checks": "write", "metadata": "read"}),
        # The signal pass (review/signal_pass.py): the reactions on the app's review comments, and who reacted.
        "signals": MappingProxyType({"pull_requests": "read", "metadata": "read"}),
        # The outbox: reactions and help replies on PR conversations, a refused answer's reaction on a review comment.
        "outbox": MappingProxyType({"issues": "write", "pull_requests": "write", "metadata": "read"}),
        # `reviewer-app learnings --repo owner/name` before the app's first review of it: the repository's id.
        "lookup": MappingProxyType({"metadata": "read"}),
    }
)
DEFAULT_WORK = "review"

_work: contextvars.ContextVar[str] = contextvars.ContextVar("reviewer_work", default=DEFAULT_WORK)


def current_work() -> str:
    return _work.get()


@contextlib.contextmanager
def acting_as(work: str) -> Iterator[None]:
    """Every GitHub call made inside (tasks started inside included) uses tokens for ``work``'s permissions."""
    if work not in WORK_PERMISSIONS:
        raise ValueError(f"unknown kind of work {work!r}")
    reset = _work.set(work)
    try:
        yield
    finally:
        _work.reset(reset)


def as_work(work: str) -> Callable[[F], F]:
    """An async function whose GitHub calls act as ``work`` (``acting_as`` around its body)."""

    def wrap(fn: F) -> F:
        @functools.wraps(fn)
        async def run(*args: Any, **kwargs: Any) -> Any:
            with acting_as(work):
                return await fn(*args, **kwargs)

        return run  # type: ignore[return-value]

    return wrap


def token_request(repo: str | None, work: str) -> dict[str, object]:
    """The body of ``POST /app/installations/{id}/access_tokens`` for ``work`` on ``repo`` ("owner/name"; None: a
    token for installation-wide reads such as listing its repositories)."""
    body: dict[str, object] = {"permissions": dict(WORK_PERMISSIONS[work])}
    if repo is not None:
        body["repositories"] = [repo.partition("/")[2]]
    return body
