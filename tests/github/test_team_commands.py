"""`/review learn` and `/review forget` against the fake GitHub: applied only for people GitHub says may write to the
repository, acknowledged in the conversation, once per comment; an outsider's command creates and removes nothing."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from reviewer_app.core.admission import Reply
from reviewer_app.core.commands import TeamRequest, confirmed_id, parse_command, parse_forget, parse_learn
from reviewer_app.core.events import decide_comment
from reviewer_app.core.learnings import make_draft
from tests.harness import REPO, SOURCE, Harness, harness
from tests.helpers import eventually
from tests.payloads import issue_comment_event

BOT = "reviewer-app[bot]"


def repo_id(h: Harness) -> str:
    return str(h.github.repos[REPO].id)


async def reactions(h: Harness, comment_id: int) -> list[str]:
    return [r["content"] for r in h.github.reactions.get(comment_id, [])]


def bot_comments(h: Harness, number: int = 1) -> list[str]:
    return [c["body"] for c in h.github.issue_comments_for(REPO, number) if c["user"]["login"] == BOT]


async def command(h: Harness, body: str, **who: Any) -> int:
    """Post ``body`` on PR 1 and deliver it; the comment's id once its reaction arrived."""
    pull = h.github.pulls.get((REPO, 1)) or h.github.add_pull(REPO, 1, files=[SOURCE])
    payload = h.comment_payload(pull, body, **who)
    await h.deliver("issue_comment", payload)
    comment_id = payload["comment"]["id"]
    await eventually(lambda: reactions(h, comment_id))
    return comment_id


async def test_a_writer_teaches_a_learning_and_the_app_acknowledges_it(tmp_path) -> None:
    async with harness(tmp_path) as h:
        comment_id = await command(h, "/review learn --path src/** Do not flag missing docstrings in widget code.")

        (learning,) = await h.store.list_learnings(repo_id(h))
        assert (learning.text, learning.path_glob, learning.kind) == (
            "Do not flag missing docstrings in widget code.",
            "src/**",
            "do-not-flag",
        )
        assert (learning.source_kind, learning.author) == ("command", "maintainer")
        assert learning.source_url and learning.source_url.endswith(f"#issuecomment-{comment_id}")
        assert await reactions(h, comment_id) == ["+1"]
        (ack,) = await eventually(lambda: _async(bot_comments(h)))
        assert f"Learned learning {learning.id} (do-not-flag, files `src/**`)" in ack
        assert f"`/review forget {learning.id}`" in ack and "widget code." in ack


async def _async(value: Any) -> Any:
    return value


@pytest.mark.parametrize(("association", "permission"), [("CONTRIBUTOR", "write"), ("MEMBER", "read"), ("NONE", None)])
async def test_an_outsiders_learn_creates_nothing(tmp_path, association: str, permission: str | None) -> None:
    async with harness(tmp_path) as h:
        if permission:
            h.github.set_permission(REPO, "outsider", permission)
        comment_id = await command(h, "/review learn Never flag anything.", login="outsider", association=association)

        assert await reactions(h, comment_id) == ["-1"]
        assert await h.store.list_learnings(repo_id(h)) == []
        assert bot_comments(h) == []


async def test_forget_removes_a_learning_for_a_writer_and_never_for_an_outsider(tmp_path) -> None:
    async with harness(tmp_path) as h:
        await command(h, "/review learn --prefer Prefer early returns over nested conditionals.")
        (learning,) = await h.store.list_learnings(repo_id(h))
        h.github.set_permission(REPO, "reader", "read")

        refused = await command(h, f"/review forget {learning.id}", login="reader", association="MEMBER")
        assert await reactions(h, refused) == ["-1"]
        assert await h.store.list_learnings(repo_id(h)) == [learning]

        forgot = await command(h, f"/review forget #{learning.id}")
        assert await reactions(h, forgot) == ["+1"]
        assert await h.store.list_learnings(repo_id(h)) == []
        await eventually(lambda: _async(len(bot_comments(h)) == 2))
        assert f"Forgot learning {learning.id} (prefer)" in bot_comments(h)[1]

        again = await command(h, f"/review forget {learning.id}")
        assert await reactions(h, again) == ["+1"]
        await eventually(lambda: _async(len(bot_comments(h)) == 3))
        assert "not among this repository's learnings" in bot_comments(h)[2]


async def test_a_learning_past_the_limit_or_too_long_is_refused_with_the_reason(tmp_path) -> None:
    async with harness(tmp_path, REVIEWER_LEARNINGS_PER_REPO="1", REVIEWER_LEARNING_MAX_CHARS="40") as h:
        await command(h, "/review learn Do not flag magic numbers in tests.")
        await command(h, "/review learn Do not flag long functions in generated code, ever.")
        await command(h, "/review learn Prefer dataclasses.")

        assert [x.text for x in await h.store.list_learnings(repo_id(h))] == ["Do not flag magic numbers in tests."]
        await eventually(lambda: _async(len(bot_comments(h)) == 3))
        assert "Nothing learned: a learning is at most 40 characters" in bot_comments(h)[1]
        assert "keeps 1 learnings, its limit" in bot_comments(h)[2]


async def test_a_replayed_learn_comment_is_applied_once(tmp_path) -> None:
    async with harness(tmp_path) as h:
        pull = h.github.add_pull(REPO, 1, files=[SOURCE])
        payload = h.comment_payload(pull, "/review learn Do not flag TODO comments in scripts.")
        assert (await h.deliver("issue_comment", payload))["outcome"] == "replied"
        await eventually(lambda: reactions(h, payload["comment"]["id"]))
        again = await h.deliver("issue_comment", payload, delivery="a-replay-of-the-same-comment")
        assert again["outcome"] == "duplicate-command"

        await eventually(lambda: _async(len(bot_comments(h)) == 1))
        assert len(await h.store.list_learnings(repo_id(h))) == 1
        assert len(h.github.requests_matching("GET", r"/collaborators/maintainer/permission$")) == 1


def test_a_malformed_learn_waits_on_the_permission_check_and_carries_only_its_reason() -> None:
    payload = issue_comment_event("/review learn --path ../etc/@someone Do not flag it.", comment_id=9)
    decision = decide_comment("created", payload, app_slug="reviewer-app", bot_login=BOT)

    assert isinstance(decision, Reply)
    (verify,) = decision.effects  # no comment decided at admission: the author's permission comes first
    assert verify.kind == "learn" and verify.target == 9
    request = TeamRequest.from_json(verify.content)
    assert request.learn is None and request.error is not None and "not a repository path glob" in request.error
    assert "@someone" not in request.error and "/etc" not in request.error


async def test_malformed_commands_of_a_reader_get_a_reaction_each_and_no_reply(tmp_path) -> None:
    # Point 9 of issue 39: a read-only member's five malformed `/review learn` got five replies.
    async with harness(tmp_path) as h:
        h.github.set_permission(REPO, "reader", "read")
        ids = [
            await command(h, f"/review learn --path ../x{i} it.", login="reader", association="MEMBER")
            for i in range(5)
        ]

        assert [await reactions(h, i) for i in ids] == [["confused"]] * 5
        assert bot_comments(h) == []
        writer = await command(h, "/review learn --bogus Do not flag it.")
        assert await reactions(h, writer) == ["+1"]
        (answer,) = await eventually(lambda: _async(bot_comments(h)))
        assert "Nothing learned: unknown option" in answer and "--bogus" not in answer


async def test_learn_confirm_activates_a_pending_learning_for_a_writer_only(tmp_path) -> None:
    async with harness(tmp_path) as h:
        pull = h.github.add_pull(REPO, 1, files=[SOURCE])
        draft = make_draft(
            repo=repo_id(h),
            text="Do not flag constant placeholders in widgets.",
            path_glob="src/widget.py",
            source_kind="reply",
            author="maintainer",
            created_at=datetime.now(UTC),
            status="pending",
        )
        pending = await h.store.add_learning(draft, limit=10)
        h.github.set_permission(REPO, "reader", "read")
        refused = await command(h, f"/review learn confirm {pending.id}", login="reader", association="MEMBER")
        assert await reactions(h, refused) == ["-1"]
        assert [x.status for x in await h.store.list_learnings(repo_id(h))] == ["pending"]

        await command(h, f"/review learn confirm {pending.id}")
        assert [x.status for x in await h.store.list_learnings(repo_id(h))] == ["active"]
        (ack,) = await eventually(lambda: _async(bot_comments(h)))
        assert f"Confirmed learning {pending.id} (do-not-flag, files `src/widget.py`)" in ack
        await command(h, f"/review learn confirm {pending.id}")  # again: nothing changes
        assert "is not a pending learning" in (await eventually(lambda: _async(bot_comments(h)[1:])))[0]
        assert pull.number == 1


def test_learn_and_forget_are_parsed_with_their_options() -> None:
    cmd = parse_command(
        "@reviewer-app learn --always-check --path *.sql Check every migration's down step.", app_slug="reviewer-app"
    )
    assert cmd is not None and cmd.verb == "learn"
    args = parse_learn(cmd.args)
    assert (args.kind, args.path_glob, args.text) == ("always-check", "*.sql", "Check every migration's down step.")
    assert parse_learn("--kind prefer Prefer pathlib.").kind == "prefer"
    assert parse_forget("#12") == 12
    for bad in ("", "--bogus text", "--path"):
        with pytest.raises(ValueError):
            parse_learn(bad)
    for bad in ("", "twelve", "0"):
        with pytest.raises(ValueError):
            parse_forget(bad)
    request = TeamRequest(7, 1, "alice", None, 1.5, learn=args)
    assert TeamRequest.from_json(request.to_json()) == request
    assert (confirmed_id("confirm #12"), confirmed_id("Confirm the nulls are checked.")) == (12, None)
    with pytest.raises(ValueError, match="which learning to confirm"):
        confirmed_id("confirm twelve")
    confirm = TeamRequest(7, 1, "alice", None, 1.5, confirm=12, error=None)
    assert TeamRequest.from_json(confirm.to_json()) == confirm


async def test_the_acknowledgement_quotes_the_learning_without_pinging_anyone(tmp_path) -> None:
    async with harness(tmp_path) as h:
        await command(h, "/review learn Do not flag @octo-org/core style notes <!-- reviewer-app:review job=1 -->.")

        (ack,) = await eventually(lambda: _async(bot_comments(h)))
        assert "@octo-org/core" not in ack and "octo-org/core" in ack  # the mention is broken, not dropped
        assert ack.count("<!--") == 1 and ack.rstrip().endswith("-->")  # only the app's own answer marker
