"""The GraphQL documents the app sends (review threads exist only in GraphQL: REST has no thread ids and cannot
resolve a thread; files are read a hundred to a query), and how GitHub's GraphQL answers are read: 64-bit ids,
blobs and rate limits.

Pure: no I/O. ``GitHubClient`` sends the documents and maps the errors.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

SECONDARY_LIMIT_DEFAULT_WAIT = 60.0  # GitHub: "wait for at least one minute" when it names no time

# Review and comment ids are read through `fullDatabaseId` (a BigInt, sent as a string): `databaseId` is a 32-bit
# Int that GitHub deprecates for these types, and github.com's ids are past 2**31 - 1. The reply mutation asks only
# for the node id: nothing the app keeps needs the reply's number. Tests validate every document against GitHub's
# published schema, deprecated fields refused.
REVIEW_THREADS_QUERY = """
query ReviewThreads($owner: String!, $name: String!, $number: Int!, $cursor: String) {
  repository(owner: $owner, name: $name) {
    pullRequest(number: $number) {
      reviewThreads(first: 100, after: $cursor) {
        pageInfo { hasNextPage endCursor }
        nodes {
          id
          isResolved
          resolvedBy { login }
          path
          comments(first: 50) {
            totalCount
            nodes { fullDatabaseId author { __typename login } pullRequestReview { fullDatabaseId } originalLine }
          }
        }
      }
    }
  }
}
"""
RESOLVE_THREAD_MUTATION = """
mutation ResolveThread($thread: ID!) {
  resolveReviewThread(input: {threadId: $thread}) { thread { id isResolved } }
}
"""
REPLY_IN_THREAD_MUTATION = """
mutation ReplyInThread($thread: ID!, $body: String!) {
  addPullRequestReviewThreadReply(input: {pullRequestReviewThreadId: $thread, body: $body}) { comment { id } }
}
"""
BLOBS_PER_QUERY = 100  # files read by one query


def blobs_query(count: int) -> str:
    """The query reading ``count`` files of one repository, each by the expression ``<commit>:<path>``.

    Every expression is a variable (``$e0``, ``$e1``, ...): a path comes from a pull request, and only the number of
    files shapes the document, so no file name (quotes, backslashes, newlines, braces) can change what is asked.
    Its cost is 1 point whatever the count: it asks for no connection.
    """
    if not 1 <= count <= BLOBS_PER_QUERY:
        raise ValueError(f"a query reads 1 to {BLOBS_PER_QUERY} files, not {count}")
    declared = "".join(f", $e{i}: String!" for i in range(count))
    fields = "".join(f"\n    f{i}: object(expression: $e{i}) {{ ...BlobText }}" for i in range(count))
    return (
        f"query Blobs($owner: String!, $name: String!{declared}) {{\n"
        f"  repository(owner: $owner, name: $name) {{{fields}\n  }}\n"
        "  rateLimit { cost remaining }\n"
        "}\n"
        "fragment BlobText on GitObject { ... on Blob { text byteSize isBinary isTruncated } }\n"
    )


def blobs_variables(expressions: Sequence[str]) -> dict[str, str]:
    """The variables of ``blobs_query(len(expressions))``."""
    return {f"e{i}": expression for i, expression in enumerate(expressions)}


@dataclass(frozen=True)
class BlobAnswer:
    """What GraphQL said of one file: ``text`` when it sent the whole text; ``binary`` when the file is binary;
    ``missing`` when there is no file at that path (nothing there, or a directory); none of them when GraphQL does
    not serve it whole (cut at 512,000 bytes, an encoding it cannot tell, a submodule), for the REST route to read."""

    text: str | None = None
    binary: bool = False
    missing: bool = False


def blob_answers(data: object, count: int) -> list[BlobAnswer]:
    """The answers to ``blobs_query(count)``, in the order of its expressions."""
    repository = data.get("repository") if isinstance(data, Mapping) else None
    if not isinstance(repository, Mapping):
        return [BlobAnswer() for _ in range(count)]
    return [_blob_answer(repository, f"f{i}") for i in range(count)]


def _blob_answer(repository: Mapping[str, Any], alias: str) -> BlobAnswer:
    if alias not in repository:
        return BlobAnswer()
    node = repository[alias]
    if node is None:
        return BlobAnswer(missing=True)  # GitHub answers null for an expression that names nothing
    if not isinstance(node, Mapping) or "isBinary" not in node:
        return BlobAnswer()  # not a blob (a tree, a submodule's commit): the REST route says what it is
    if node.get("isBinary") is True:
        return BlobAnswer(binary=True)
    text = node.get("text")
    if node.get("isBinary") is False and node.get("isTruncated") is False and isinstance(text, str):
        return BlobAnswer(text=text)
    if node.get("byteSize") == 0:
        return BlobAnswer(text="")
    return BlobAnswer()


GRAPHQL_DOCUMENTS = (REVIEW_THREADS_QUERY, RESOLVE_THREAD_MUTATION, REPLY_IN_THREAD_MUTATION, blobs_query(1))


def graphql_endpoint(base_url: str) -> str:
    """GitHub's GraphQL endpoint next to a REST base URL (github.com: /graphql; GitHub Enterprise Server:
    /api/v3 becomes /api/graphql)."""
    base = base_url.rstrip("/")
    if base.endswith("/api/v3"):
        return base[: -len("/v3")] + "/graphql"
    return base + "/graphql"


def full_database_id(value: object) -> int | None:
    """A ``BigInt`` id as GitHub sends it (a decimal string; a number is taken too), or None when absent or not an
    integer: a wrong id must never be compared as if it were one."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    return None


def limit_wait(headers: Mapping[str, str], now: float) -> float:
    """When a rate-limited request may be tried again, by GitHub's rules: ``retry-after`` seconds if present, else
    ``x-ratelimit-reset`` when ``x-ratelimit-remaining`` is 0, else at least a minute."""
    lowered = {key.lower(): value for key, value in headers.items()}
    retry_after = lowered.get("retry-after")
    if retry_after is not None:
        try:
            return now + max(float(retry_after), 0.0)
        except ValueError:
            pass
    reset = lowered.get("x-ratelimit-reset")
    if lowered.get("x-ratelimit-remaining") == "0" and reset is not None:
        try:
            return max(float(reset), now)
        except ValueError:
            pass
    return now + SECONDARY_LIMIT_DEFAULT_WAIT


def _errors(response: object) -> Sequence[Mapping[str, Any]]:
    errors = response.get("errors") if isinstance(response, Mapping) else None
    return [e for e in errors if isinstance(e, Mapping)] if isinstance(errors, list) else []


def graphql_limit_retry_at(status: int, headers: Mapping[str, str], response: object, now: float) -> float | None:
    """When to try again if this GraphQL answer is a rate limit; None if it is not one.

    GitHub's two shapes: a primary limit is ``200`` with an error (type ``RATE_LIMITED``) and
    ``x-ratelimit-remaining: 0`` ("do not retry until ``x-ratelimit-reset``"); a secondary limit is ``200`` or ``403``
    (``429`` too) with an error message that says so, often with ``retry-after``.
    """
    lowered = {key.lower(): value for key, value in headers.items()}
    said = any(
        str(e.get("type") or "").upper() == "RATE_LIMITED" or "rate limit" in str(e.get("message") or "").lower()
        for e in _errors(response)
    )
    message = response.get("message") if isinstance(response, Mapping) else None
    said = said or "rate limit" in str(message or "").lower()
    limited = said or (
        status in (403, 429) and ("retry-after" in lowered or lowered.get("x-ratelimit-remaining") == "0")
    )
    if status == 429 or limited:
        return limit_wait(headers, now)
    return None
