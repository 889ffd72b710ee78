"""The fake GitHub's GraphQL endpoint: review threads, resolving them and replying in them, executed by graphql-core
against GitHub's published schema, so a query GitHub would reject is rejected here too, and so is an answer of ours
that does not fit the schema.

The schema is tests/fixtures/github-graphql/schema.graphql, from the npm package @octokit/graphql-schema 15.26.1
(MIT, see LICENSE.md next to it). GitHub's published schema does not pass graphql-core's own checks of a schema: it
defines two fields of ``EnterpriseOwnerInfo`` twice, and deprecates fields (``PullRequestReview.databaseId``,
``Project.id``, ...) that implement interface fields it does not deprecate, a rule graphql-core 3.3 enforces before
it validates any document. GitHub serves it as it is, so it is built as given (``assume_valid_sdl`` and
``assume_valid``); every document is still validated against it in full.

Threads are the fake's review comments: a comment without ``in_reply_to_id`` opens a thread (node id
``PRRT_<its id>``), replies name it. ``FakeGitHub.review_threads`` (a ``ThreadsState``) holds which threads are
resolved, by whom, and every document the schema rejected. A thread's ``resolvedBy`` is a ``User``: one a person
resolved names them; one an App resolved names nobody (a ``Bot`` is no ``User``), so it is null, the harsher answer.
Tests resolve a thread as a person with ``resolve_thread_as``.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aiohttp import web
from graphql import GraphQLError, GraphQLScalarType, GraphQLSchema, build_schema, execute_sync, parse, validate

from tests.fakes.github.api import AUTH, RATE_LIMIT, AuthInfo
from tests.fakes.github.graphql_cost import QueryLimitError, query_cost
from tests.fakes.github.permissions import actor, has_permission, sees
from tests.fakes.github.shapes import blob_sha

if TYPE_CHECKING:
    from tests.fakes.github import FakeGitHub

Json = dict[str, Any]
SCHEMA_PATH = Path(__file__).resolve().parents[2] / "fixtures" / "github-graphql" / "schema.graphql"
SCHEMA_PACKAGE = "@octokit/graphql-schema@15.26.1"
MAX_PAGE = 100  # GitHub's ceiling on `first`
BLOB_TEXT_LIMIT = 512_000  # GitHub cuts `Blob.text` at this many bytes and says so with `isTruncated`
COST = web.RequestKey("graphql_cost", int)  # the points a query cost, for the middleware's rate-limit count


_schema: GraphQLSchema | None = None
_schema_lock = threading.Lock()


def github_schema() -> GraphQLSchema:
    """GitHub's public GraphQL schema, built once per process (two seconds of CPU, more on a busy machine)."""
    global _schema
    with _schema_lock:
        if _schema is None:
            schema = build_schema(SCHEMA_PATH.read_text(encoding="utf-8"), assume_valid_sdl=True, assume_valid=True)
            # GitHub: "Represents non-fractional signed whole numeric values. Since the value may exceed the size of
            # a 32-bit integer, it's encoded as a string."
            big = schema.type_map["BigInt"]
            assert isinstance(big, GraphQLScalarType)
            big.serialize = _big_int  # type: ignore[method-assign]
            if hasattr(big, "coerce_output_value"):  # graphql-core 3.3's name for it
                big.coerce_output_value = _big_int
            _schema = schema
        return _schema


def _big_int(value: Any) -> str:
    return str(int(value))


def schema_errors(document: str) -> list[str]:
    """What GitHub's schema says is wrong with ``document`` (empty: valid)."""
    try:
        return [e.message for e in validate(github_schema(), parse(document))]
    except GraphQLError as exc:
        return [exc.message]


@dataclass
class ThreadsState:
    resolved: set[int] = field(default_factory=set)  # ids of the comments that opened resolved threads
    resolved_by: dict[int, str] = field(default_factory=dict)  # of those, who resolved it, when a person did
    rejected: list[str] = field(default_factory=list)  # schema errors of documents sent, and of answers given
    documents: list[str] = field(default_factory=list)  # every document received, for tests


def register_graphql(fake: FakeGitHub, app: web.Application) -> None:
    app.router.add_post("/graphql", partial(_graphql, fake))


def add_thread_reply(fake: FakeGitHub, repo: str, number: int, comment_id: int, login: str, body: str) -> Json:
    """A reply by ``login`` in the thread the review comment ``comment_id`` opened."""
    root = _comment(fake, repo, number, comment_id)
    reply = {
        "id": fake.next_id(),
        "pull_request_review_id": None,
        "in_reply_to_id": comment_id,
        "path": root["path"],
        "line": root["line"],
        "side": root.get("side", "RIGHT"),
        "body": body,
        "commit_id": root["commit_id"],
        "user": {"login": login, "type": "Bot" if login.endswith("[bot]") else "User"},
    }
    fake.review_comments.setdefault((repo, number), []).append(reply)
    return reply


def thread_replies(fake: FakeGitHub, repo: str, number: int, comment_id: int) -> list[Json]:
    return [c for c in fake.review_comments_for(repo, number) if c.get("in_reply_to_id") == comment_id]


def blob_reads(fake: FakeGitHub, path: str) -> list[str]:
    """The commits at which the app read ``path``: in a GraphQL query of blobs (its ``<commit>:<path>`` variables) or
    through the contents route (its ``ref``), in the order asked."""
    reads: list[str] = []
    for r in fake.requests:
        if r.method == "POST" and r.path == "/graphql" and isinstance(r.request_json, dict):
            for value in (r.request_json.get("variables") or {}).values():
                rev, sep, asked = str(value).partition(":")
                if sep and asked == path:
                    reads.append(rev)
        elif r.method == "GET" and r.path.endswith(f"/contents/{path}"):
            reads.append(r.query.get("ref", ""))
    return reads


def is_resolved(fake: FakeGitHub, comment_id: int) -> bool:
    return comment_id in fake.review_threads.resolved


def resolve_thread_as(fake: FakeGitHub, comment_id: int, login: str) -> None:
    """``login`` (a person) resolves the thread the review comment ``comment_id`` opened, as on GitHub's page."""
    fake.review_threads.resolved.add(comment_id)
    fake.review_threads.resolved_by[comment_id] = login


# -- the endpoint ----------------------------------------------------------------------------------------------


async def _graphql(fake: FakeGitHub, request: web.Request) -> web.Response:
    if request[AUTH].kind not in ("token", "user") or request[AUTH].expired:
        return web.json_response({"message": "Bad credentials"}, status=401)
    try:
        data = await request.json()
        query, variables = str(data["query"]), data.get("variables") or {}
    except (ValueError, KeyError, TypeError):
        return web.json_response({"message": "Problems parsing JSON"}, status=400)
    state = fake.review_threads
    state.documents.append(query)
    # Built off the event loop at the first query (the fake shares its loop with the app in tests/harness.py, and a
    # two-second stall there costs leases); tests that send no GraphQL never pay for it.
    schema = await asyncio.to_thread(github_schema)
    errors = schema_errors(query)
    if errors:
        state.rejected.extend(errors)
        return web.json_response({"errors": [{"message": m} for m in errors]})
    document = parse(query)
    try:
        cost = query_cost(schema, document, variables)
    except QueryLimitError as exc:  # GitHub refuses it before running it, and counts a point
        request[COST] = 1
        state.rejected.append(str(exc))
        return web.json_response({"errors": [{"type": "MAX_NODE_LIMIT_EXCEEDED", "message": str(exc)}]})
    auth, now = request[AUTH], fake.clock()
    left = fake.rate_limits.left(auth, now, "graphql")
    if cost.points > left:  # GitHub's primary limit: 200, RATE_LIMITED, nothing run, nothing counted
        request[COST] = 0
        who = f"installation ID {auth.installation_id}" if auth.installation_id else "this app"
        message = f"API rate limit exceeded for {who}."
        return web.json_response(
            {"errors": [{"type": "RATE_LIMITED", "code": "graphql_rate_limit", "message": message}]}
        )
    request[COST] = cost.points
    limit = {
        "cost": cost.points,
        "limit": RATE_LIMIT,
        "nodeCount": cost.nodes,
        "remaining": left - cost.points,
        "used": RATE_LIMIT - left + cost.points,
        "resetAt": _iso((int(now) // 3600 + 1) * 3600),
    }
    result = execute_sync(schema, document, root_value=_Root(fake, auth, limit), variable_values=variables)
    body: Json = {"data": result.data}
    if result.errors:
        body["errors"] = [{"message": e.message, "path": e.path} for e in result.errors]
        # A missing object is GitHub's NOT_FOUND; anything else is an answer of ours the schema does not allow.
        state.rejected.extend(e.message for e in result.errors if not e.message.startswith("Could not resolve"))
    return web.json_response(body)


def _iso(epoch: int) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _comment(fake: FakeGitHub, repo: str, number: int, comment_id: int) -> Json:
    return next(c for c in fake.review_comments_for(repo, number) if c["id"] == comment_id)


def _author(fake: FakeGitHub, user: Json) -> Json:
    login = str(user["login"])
    if login.endswith("[bot]"):  # GraphQL names a bot without the suffix REST gives it
        return {"__typename": "Bot", "login": login.removesuffix("[bot]")}
    return {"__typename": "User", "login": login}


def _page(items: list[Any], first: int | None, after: str | None) -> tuple[list[Any], Json]:
    if first is None or not 0 <= first <= MAX_PAGE:
        raise GraphQLError(f"Requesting {first} records exceeds the `first` limit of {MAX_PAGE} records.")
    start = int(after) if after else 0
    chunk = items[start : start + first]
    end = start + len(chunk)
    return chunk, {"hasNextPage": end < len(items), "endCursor": str(end) if chunk else None}


class _Root(dict[str, Any]):
    """Query and mutation roots over the fake's state; graphql-core's default resolver calls the callables."""

    def __init__(self, fake: FakeGitHub, auth: AuthInfo, limit: Json) -> None:
        super().__init__(
            rateLimit=lambda info, dryRun=False, **_: limit,
            repository=partial(_repository, fake, auth),
            resolveReviewThread=partial(_resolve_thread, fake, auth),
            addPullRequestReviewThreadReply=partial(_reply, fake, auth),
        )


def _visible(fake: FakeGitHub, auth: AuthInfo, repo: str) -> bool:
    """The token's installation has ``repo`` and the token was minted for it (GitHub: "Could not resolve")."""
    found = fake.repos.get(repo)
    return found is not None and sees(auth, found)


def _require(auth: AuthInfo, needed: tuple[tuple[str, str], ...]) -> None:
    if not has_permission(auth, needed):
        raise GraphQLError("Resource not accessible by integration")


def _repository(fake: FakeGitHub, auth: AuthInfo, info: Any, owner: str, name: str, **_: Any) -> Json | None:
    repo = f"{owner}/{name}"
    if not _visible(fake, auth, repo):
        raise GraphQLError(f"Could not resolve to a Repository with the name '{repo}'.")
    return {"pullRequest": partial(_pull_request, fake, auth, repo), "object": partial(_object, fake, auth, repo)}


def _object(
    fake: FakeGitHub, auth: AuthInfo, repo: str, info: Any, expression: str | None = None, oid: str | None = None
) -> Json | None:
    """``Repository.object(expression: "<rev>:<path>")``: the blob at that path of that commit, or null when there is
    none (a tree or a submodule is no blob: its fields of ``... on Blob`` stay unasked). As GitHub: text is null for a
    binary blob and cut at 512,000 bytes (``isTruncated``); reading a blob needs ``contents: read``."""
    _require(auth, (("contents", "read"),))
    found = fake.repos[repo]
    rev, sep, path = (expression or "").partition(":")
    if not sep or oid is not None:
        return None
    tree = found.contents.get(rev) or found.contents.get(found.resolve(rev)) or {}
    links = found.links.get(rev) or found.links.get(found.resolve(rev)) or {}
    if path in links:  # git stores a symlink as a blob holding its target; a submodule as a commit
        link = links[path]
        if link["type"] != "symlink":
            return {"__typename": "Commit", "oid": blob_sha(link["submodule_git_url"])}
        text = str(link["target"])
    elif path in tree:
        text = tree[path]
    elif any(p.startswith(f"{path}/") for p in tree):
        return {"__typename": "Tree", "oid": blob_sha(f"{rev}:{path}")}
    else:
        return None
    data = text.encode()
    binary = b"\x00" in data
    cut = data[:BLOB_TEXT_LIMIT]
    return {
        "__typename": "Blob",
        "id": f"B_{blob_sha(text)}",
        "oid": blob_sha(text),
        "abbreviatedOid": blob_sha(text)[:7],
        "byteSize": len(data),
        "isBinary": binary,
        "isTruncated": not binary and len(cut) < len(data),
        "text": None if binary else cut.decode("utf-8", errors="ignore"),
    }


def _pull_request(fake: FakeGitHub, auth: AuthInfo, repo: str, info: Any, number: int, **_: Any) -> Json:
    _require(auth, (("pull_requests", "read"),))
    if (repo, number) not in fake.pulls:
        raise GraphQLError(f"Could not resolve to a PullRequest with the number of {number}.")

    def threads(info: Any, first: int | None = None, after: str | None = None, **_: Any) -> Json:
        roots = [c for c in fake.review_comments_for(repo, number) if not c.get("in_reply_to_id")]
        chunk, page_info = _page(roots, first, after)
        return {"nodes": [_thread(fake, repo, number, c) for c in chunk], "pageInfo": page_info}

    return {"reviewThreads": threads}


def _thread(fake: FakeGitHub, repo: str, number: int, root: Json) -> Json:
    def comments(info: Any, first: int | None = None, after: str | None = None, **_: Any) -> Json:
        chain = [root, *thread_replies(fake, repo, number, root["id"])]
        chunk, page_info = _page(chain, first, after)
        return {"totalCount": len(chain), "nodes": [_comment_node(fake, c) for c in chunk], "pageInfo": page_info}

    return {
        "id": f"PRRT_{root['id']}",
        "isResolved": root["id"] in fake.review_threads.resolved,
        "resolvedBy": _resolver(fake, root["id"]),
        "path": root["path"],
        "comments": comments,
    }


def _resolver(fake: FakeGitHub, comment_id: int) -> Json | None:
    login = fake.review_threads.resolved_by.get(comment_id)
    if comment_id not in fake.review_threads.resolved or login is None:
        return None
    return {"__typename": "User", "login": login}


def _comment_node(fake: FakeGitHub, comment: Json) -> Json:
    review_id = comment.get("pull_request_review_id")
    # `databaseId` is GitHub's 32-bit Int: for ids past 2**31 - 1 graphql-core answers as GitHub does, an error and
    # null. `fullDatabaseId` is a BigInt, serialised as a string (github_schema).
    return {
        "id": f"PRRC_{comment['id']}",
        "databaseId": comment["id"],
        "fullDatabaseId": comment["id"],
        "author": _author(fake, comment["user"]),
        "pullRequestReview": (
            {"id": f"PRR_{review_id}", "databaseId": review_id, "fullDatabaseId": review_id}
            if review_id is not None
            else None
        ),
        "originalLine": comment.get("line"),
        "body": comment["body"],
    }


def _find_thread(fake: FakeGitHub, auth: AuthInfo, thread_id: str) -> tuple[str, int, Json]:
    for (repo, number), comments in fake.review_comments.items():
        if not _visible(fake, auth, repo):
            continue  # a node of a repository the token cannot see is no node to it
        for comment in comments:
            if not comment.get("in_reply_to_id") and f"PRRT_{comment['id']}" == thread_id:
                return repo, number, comment
    raise GraphQLError(f"Could not resolve to a node with the global id of '{thread_id}'")


def _resolve_thread(fake: FakeGitHub, auth: AuthInfo, info: Any, input: Json) -> Json:
    repo, number, root = _find_thread(fake, auth, str(input["threadId"]))
    _require(auth, (("pull_requests", "write"),))
    fake.review_threads.resolved.add(root["id"])
    if auth.kind == "user" and auth.user:  # a person's token resolves as that person; an App's as nobody (a Bot)
        fake.review_threads.resolved_by[root["id"]] = auth.user
    fake.counters["threads_resolved"] += 1
    return {"thread": _thread(fake, repo, number, root), "clientMutationId": input.get("clientMutationId")}


def _reply(fake: FakeGitHub, auth: AuthInfo, info: Any, input: Json) -> Json:
    repo, number, root = _find_thread(fake, auth, str(input["pullRequestReviewThreadId"]))
    _require(auth, (("pull_requests", "write"),))
    body = str(input.get("body") or "")
    if not body.strip():
        raise GraphQLError("Body can't be blank")
    reply = add_thread_reply(fake, repo, number, root["id"], actor(fake.app_slug, auth), body)
    fake.counters["thread_replies"] += 1
    return {"comment": _comment_node(fake, reply), "clientMutationId": input.get("clientMutationId")}
