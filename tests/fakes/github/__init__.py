"""A fake GitHub REST API (an aiohttp app) with GitHub-shaped JSON, real auth checks and fault injection.

By concern: ``state`` (the model tests arrange and inspect; its records in ``model``), ``faults`` (fault injection),
``auth`` (who is calling, and the guards every route calls), ``api`` (errors, pagination, rate-limit headers),
``shapes`` and ``diffs`` (GitHub-shaped JSON, a pull request's files and patches), one module of ``routes`` per API
area, and ``server`` (the aiohttp app that wires the routes, and the ways to run it). Tests import from here.
"""

from tests.fakes.github.api import (
    API_HEADERS,
    API_MEDIA_TYPE,
    API_VERSIONS,
    DOCS_URL,
    PER_PAGE_DEFAULT,
    PER_PAGE_MAX,
    RATE_LIMIT,
    ApiError,
    AuthInfo,
)
from tests.fakes.github.auth import JWT_MAX_LIFETIME
from tests.fakes.github.diffs import added_file, commentable_lines, hunk_lines, pull_file
from tests.fakes.github.faults import FAULT_KINDS, Fault
from tests.fakes.github.model import Installation, IssuedToken, ManifestCode, Pull, RecordedRequest, Repo
from tests.fakes.github.routes.apps import MANIFEST_CODE_LIFETIME
from tests.fakes.github.routes.checks import CHECK_STATUSES
from tests.fakes.github.routes.compare import COMPARE_FILES_CAP
from tests.fakes.github.routes.issues import REACTIONS
from tests.fakes.github.routes.pulls import PULL_FILES_CAP
from tests.fakes.github.routes.reviews import REVIEW_EVENTS
from tests.fakes.github.server import FakeGitHub, FakeGitHubThread, main, running, start_fake_github
from tests.fakes.github.shapes import Json, blob_sha, iso, random_sha

__all__ = [
    "API_HEADERS",
    "API_MEDIA_TYPE",
    "API_VERSIONS",
    "CHECK_STATUSES",
    "COMPARE_FILES_CAP",
    "DOCS_URL",
    "FAULT_KINDS",
    "JWT_MAX_LIFETIME",
    "MANIFEST_CODE_LIFETIME",
    "PER_PAGE_DEFAULT",
    "PER_PAGE_MAX",
    "PULL_FILES_CAP",
    "RATE_LIMIT",
    "REACTIONS",
    "REVIEW_EVENTS",
    "ApiError",
    "AuthInfo",
    "FakeGitHub",
    "FakeGitHubThread",
    "Fault",
    "Installation",
    "IssuedToken",
    "Json",
    "ManifestCode",
    "Pull",
    "RecordedRequest",
    "Repo",
    "added_file",
    "blob_sha",
    "commentable_lines",
    "hunk_lines",
    "iso",
    "main",
    "pull_file",
    "random_sha",
    "running",
    "start_fake_github",
]
