"""The GitHub calls the app makes (REST, and GraphQL for review threads), one concern per module: the core
(installation auth, in-place retries of reads, paced writes, error mapping) in api_transport.py and api_errors.py,
the calls in the other ``api_*.py``. ``GitHubClient`` joins them; the names other modules import stay here."""

from __future__ import annotations

from reviewer_app.github.api_app import AppCalls
from reviewer_app.github.api_archive import ArchiveCalls
from reviewer_app.github.api_check_runs import CheckRunCalls
from reviewer_app.github.api_contents import ContentCalls
from reviewer_app.github.api_errors import redact
from reviewer_app.github.api_pulls import MAX_COMPARE_FILES, MAX_PULL_FILES, PullCalls
from reviewer_app.github.api_reviews import ReviewCalls
from reviewer_app.github.api_threads import ReviewThreadCalls
from reviewer_app.github.api_transport import ACCEPT, API_VERSION, Json

__all__ = ["ACCEPT", "API_VERSION", "MAX_COMPARE_FILES", "MAX_PULL_FILES", "GitHubClient", "Json", "redact"]


class GitHubClient(AppCalls, PullCalls, ReviewCalls, CheckRunCalls, ReviewThreadCalls, ContentCalls, ArchiveCalls):
    """The app's GitHub API adapter: every call the app makes, each raising only ``JobError`` subclasses.

    Reads (GET) are retried in place on 5xx, timeouts and connection errors; writes are never retried in place
    (the caller reconciles instead), and an installation's writes go out one at a time. A 401 drops the
    installation's token and retries the call once with a fresh one.
    """
