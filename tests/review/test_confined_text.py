"""Text that leaves the app is confined once, at the end (the GitHub client's one write path, core/links.py): whatever
the model answers or a learning says, nothing the app writes to GitHub (a review, its inline comments and learnings
footer, an answer and its "Noted as learning" line, a command's acknowledgement, a check run) links to or loads
anything off GitHub's own host. Against the fake GitHub and the fake Anthropic."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import cmarkgfm

from reviewer_app.core.states import JobState
from tests.fakes.github import FakeGitHub
from tests.harness import REPO, Harness, harness
from tests.review.test_learnings_e2e import RULE, finding, review_pr, teach
from tests.review.test_replies import answers_in, reply_payload, reviewed_thread

IMAGE = "![x](https://evil.example/p.png)"
LINK = "[the docs](https://evil.example/phish)"


def written(github: FakeGitHub) -> Iterator[str]:
    """Every Markdown text the app wrote on the fake GitHub: review bodies, review and issue comments, check runs."""
    for reviews in github.reviews.values():
        yield from (str(r.get("body") or "") for r in reviews)
    for comments in (*github.review_comments.values(), *github.issue_comments.values()):
        yield from (str(c.get("body") or "") for c in comments if c["user"]["login"].endswith("[bot]"))
    for run in github.check_runs.values():
        output: dict[str, Any] = run.get("output") or {}
        yield from (str(output.get(f) or "") for f in ("summary", "text"))


def assert_confined(github: FakeGitHub) -> None:
    texts = list(written(github))
    assert any("evil.example" in t for t in texts)  # the address is shown, as text
    for text in texts:
        html = cmarkgfm.github_flavored_markdown_to_html(text)
        addresses = re.findall(r'(?:href|src)="([^"]*)"', html)
        assert "<img" not in html and not [a for a in addresses if "evil.example" in a], text


async def test_an_answer_and_the_learning_it_notes_link_nothing_off_github(tmp_path) -> None:
    async with harness(tmp_path) as h:
        pull, root = await reviewed_thread(h)
        h.github.set_permission(REPO, "maintainer", "write")
        rule = f"Do not flag constant return values in widget placeholders {IMAGE}"
        h.anthropic.script_answer(f"Understood, see {LINK} {IMAGE}", disputes=True, learning=rule)
        payload = reply_payload(
            h, pull, root["id"], "Intended: the build fills it in.", login="maintainer", association="MEMBER"
        )
        admitted = await h.deliver("pull_request_review_comment", payload)
        await h.wait_state(admitted["job_id"], JobState.SUCCEEDED)
        (answer,) = answers_in(h, root["id"])
        assert "the docs (`https://evil.example/phish`)" in answer["body"]
        assert_confined(h.github)


async def test_a_learnings_text_is_confined_in_its_acknowledgement_the_footer_and_the_check_run(tmp_path) -> None:
    async with harness(tmp_path) as h:
        h.github.set_permission(REPO, "maintainer", "write")
        await review_pr(h, 1, [finding()])
        await teach(h, 1, f"/review learn --path src/** {RULE} {IMAGE}")
        await review_pr(h, 2, [finding(), finding(f"The loader returns raw data. {LINK} {IMAGE}", line=5)])
        body = _review_body(h, 2)
        assert "team learning applied" in body  # the footer names the learning, image and all, as text
        assert_confined(h.github)


def _review_body(h: Harness, number: int) -> str:
    [review] = h.reviews(number)
    return str(review["body"])
