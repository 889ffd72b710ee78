"""`reviewer-app review URL`, the real command line (in-process `main`, and once as a subprocess) against the fake
GitHub and the fake Anthropic: a person's token and the model key, no App, no webhook, no database of its own. It
prints the review as the App would post it (Markdown, or --json), posts it only with --post, and once per head."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from reviewer_app.cli.main import main
from reviewer_app.core.markers import parse_markers
from reviewer_app.review.prompt import SYSTEM_PROMPT
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.github import FakeGitHub, added_file
from tests.fakes.threads import FakesThread
from tests.github.test_fake_schema import disagreements
from tests.prompt_text import files_shown

REPO = "octo-org/widgets"
PERSON = "reviewer-bob"
SOURCE = added_file("src/widget.py", [line for i in range(1, 6) for line in (f"def f{i}():", f"    return {i}")])
ANSWER = {
    "summary": "One risk: f2 returns a constant.",
    "comments": [
        {"path": "src/widget.py", "line": 4, "side": "RIGHT", "severity": "warning", "body": "f2 returns a constant."}
    ],
}
DEADLINE = 60.0


class World:
    """The fakes, the pull request and the person's token; ``review`` runs the command as a person types it."""

    def __init__(self, fakes: FakesThread, token: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.fakes, self.token, self.tmp_path, self.monkeypatch = fakes, token, tmp_path, monkeypatch
        self.url = f"https://github.com/{REPO}/pull/1"

    @property
    def github(self) -> FakeGitHub:
        return self.fakes.github

    @property
    def anthropic(self) -> FakeAnthropic:
        return self.fakes.anthropic

    def env(self, **extra: str) -> dict[str, str]:
        return {
            "GITHUB_TOKEN": self.token,
            "GITHUB_API_URL": self.fakes.github_url,
            "ANTHROPIC_API_KEY": "sk-ant-test",
            "ANTHROPIC_BASE_URL": self.fakes.anthropic_url,
            "REVIEWER_ENV_FILE": str(self.tmp_path / "absent.env"),
            "PATH": "/usr/bin:/bin",
            **extra,
        }

    def review(self, *args: str, capsys: pytest.CaptureFixture[str], env: dict[str, str] | None = None) -> Any:
        """``reviewer-app review ARGS`` in this process, in an environment of ``env`` alone; (status, out, err)."""
        for name in list(os.environ):
            if name.startswith(("GITHUB_", "REVIEWER_", "ANTHROPIC_", "DATABASE_")) or name in (
                "GH_TOKEN",
                "LOG_LEVEL",
            ):
                self.monkeypatch.delenv(name)
        for name, value in (self.env() if env is None else env).items():
            self.monkeypatch.setenv(name, value)
        self.monkeypatch.chdir(self.tmp_path)
        status = main(["review", *args])
        out, err = capsys.readouterr()
        return status, out, err

    def reviews(self) -> list[dict[str, Any]]:
        return self.fakes.call(self.github.reviews_for, REPO, 1)

    def review_comments(self) -> list[dict[str, Any]]:
        return self.fakes.call(self.github.review_comments_for, REPO, 1)


@pytest.fixture(autouse=True)
def logging_as_it_was() -> Iterator[None]:
    """`main` sets up the process's logging (the review command quiets it to CRITICAL): put it back for the tests
    that run after these in the same process, whose ERROR records would otherwise never reach caplog."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    github, anthropic = FakeGitHub(), FakeAnthropic()
    inst = github.add_installation()
    github.add_repo(REPO, inst.id)  # private: the person sees it through their role in it
    github.set_permission(REPO, PERSON, "read")  # a reader may comment on pull requests, as on GitHub
    github.add_pull(REPO, 1, files=[SOURCE], title="Add widgets", body="Adds five widgets.")
    token = github.add_user_token(PERSON)
    anthropic.script_tool_answer(ANSWER)
    with FakesThread(github, anthropic) as fakes:
        yield World(fakes, token, tmp_path, monkeypatch)


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


def test_the_review_is_printed_as_the_app_would_post_it_and_nothing_is_posted(world: World, capsys) -> None:
    status, out, err = world.review(world.url, capsys=capsys)
    assert status == 0, err
    # The App's review: its summary, the finding's severity and text on its line, the App's marker for the head.
    head = world.github.pulls[(REPO, 1)].head_sha
    assert "One risk: f2 returns a constant." in out
    assert "#### `src/widget.py` line 4" in out and "**🟠 Warning**\n\nf2 returns a constant." in out
    assert [m.head_sha for m in parse_markers(out)] == [head]
    assert "reviewed, not posted" in one_line(err) and "--post posts it" in err
    # The App's prompt and tool, the files as the App shows them; its finding checked by the verification pass.
    [asked] = world.anthropic.review_requests
    assert len(world.anthropic.verify_requests) == 1
    assert asked.system[0]["text"] == SYSTEM_PROMPT
    assert [t["name"] for t in asked.tools] == ["submit_review"]
    assert "src/widget.py" in files_shown(asked)
    # Nothing written on GitHub, and every request made as the person: no App JWT, no installation token.
    assert world.reviews() == [] and world.review_comments() == []
    assert world.github.check_runs == {}
    seen = world.fakes.call(lambda: list(world.github.requests))
    assert seen and {r.auth for r in seen} == {"user"}
    assert all(r.method == "GET" for r in seen)


def test_json_gives_the_structured_findings_and_the_review_as_github_would_get_it(world: World, capsys) -> None:
    status, out, err = world.review(world.url, "--json", capsys=capsys)
    assert status == 0, err
    report = json.loads(out)
    head = world.github.pulls[(REPO, 1)].head_sha
    assert (report["pull_request"], report["repository"], report["number"]) == (world.url, REPO, 1)
    assert report["head_sha"] == head
    assert report["summary"] == "One risk: f2 returns a constant."
    assert report["findings"] == [
        {
            "path": "src/widget.py",
            "line": 4,
            "side": "RIGHT",
            "start_line": None,
            "severity": "warning",
            "body": "f2 returns a constant.",
            "suggestion": None,
            "inline": True,
        }
    ]
    assert report["counts"]["warning"] == 1 and report["counts"]["files_reviewed"] == 1
    [comment] = report["review"]["comments"]
    assert (comment["path"], comment["line"], comment["side"]) == ("src/widget.py", 4, "RIGHT")
    assert [m.head_sha for m in parse_markers(report["review"]["body"])] == [head]
    assert report["posted"] is None
    assert report["usage"]["input_tokens"] > 0 and report["usage"]["output_tokens"] > 0
    assert report["usage"]["dollars"] > 0  # the default model is priced (core/pricing.py)
    assert world.reviews() == []


def test_post_publishes_the_review_once_and_a_second_post_publishes_nothing(world: World, capsys) -> None:
    status, out, err = world.review(world.url, "--post", capsys=capsys)
    assert status == 0, err
    [review] = world.reviews()
    head = world.github.pulls[(REPO, 1)].head_sha
    assert review["user"]["login"] == PERSON  # posted as the token's person
    assert (review["state"], review["commit_id"]) == ("COMMENTED", head)
    assert [m.head_sha for m in parse_markers(review["body"])] == [head]
    assert review["body"] in out  # what was printed is what was posted
    [comment] = world.review_comments()
    assert (comment["path"], comment["line"], comment["pull_request_review_id"]) == ("src/widget.py", 4, review["id"])
    assert f"#pullrequestreview-{review['id']}" in one_line(err) and "posted" in err
    assert world.github.check_runs == {}  # a person's token writes no check run

    status, out, err = world.review(world.url, "--post", capsys=capsys)
    assert status == 0, err
    assert world.reviews() == [review]  # nothing posted twice
    # And the model not asked again (the review, and the verification of its finding, once each).
    assert (len(world.anthropic.review_requests), len(world.anthropic.verify_requests)) == (1, 1)
    assert "already reviewed" in one_line(err) and f"#pullrequestreview-{review['id']}" in err
    assert review["body"] in out

    # What the fake answered the person, and what the command sent, is what GitHub's schemas allow.
    problems, seen = disagreements(world.fakes.call(lambda: list(world.github.requests)))
    assert problems == []
    assert {("GET", "/user"), ("POST", "/repos/{owner}/{repo}/pulls/{number}/reviews")} <= seen

    # A new head is a new review.
    world.fakes.call(world.github.advance_head, REPO, 1)
    world.anthropic.script_tool_answer(ANSWER)
    status, _, err = world.review(world.url, "--post", capsys=capsys)
    assert status == 0, err
    assert len(world.reviews()) == 2


@pytest.mark.parametrize(
    "url",
    [
        "octo-org/widgets#1",
        "https://github.com/octo-org/widgets/issues/1",
        "https://github.com/octo-org/widgets/pull/",
        "https://github.com/octo-org/widgets/pull/x1",
        "ftp://github.com/octo-org/widgets/pull/1",
        "https://github.com/octo-org/pull/1",
    ],
)
def test_a_bad_url_is_one_line_and_exit_2(world: World, capsys, url: str) -> None:
    status, out, err = world.review(url, capsys=capsys)
    assert status == 2
    assert out == ""
    assert one_line(err).startswith("reviewer-app: review: not a pull request URL")
    assert "https://HOST/OWNER/REPO/pull/NUMBER" in err
    assert world.fakes.call(lambda: len(world.github.requests)) == 0


def test_no_token_is_one_line_and_exit_2(world: World, capsys) -> None:
    env = world.env()
    del env["GITHUB_TOKEN"]  # and no gh on the PATH
    status, out, err = world.review(world.url, capsys=capsys, env=env)
    assert status == 2 and out == ""
    assert one_line(err).startswith("reviewer-app: review: no GitHub token: set GITHUB_TOKEN")
    assert "gh auth login" in err
    assert world.fakes.call(lambda: len(world.github.requests)) == 0


def test_no_model_key_is_one_line_and_exit_2(world: World, capsys) -> None:
    env = world.env()
    del env["ANTHROPIC_API_KEY"]
    status, out, err = world.review(world.url, capsys=capsys, env=env)
    assert status == 2 and out == ""
    assert one_line(err) == "reviewer-app: review: ANTHROPIC_API_KEY (the model key) is not set"


def test_without_github_token_the_github_clis_token_is_used(world: World, capsys, tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    asked = tmp_path / "gh-args"
    gh = bin_dir / "gh"
    gh.write_text(f'#!/bin/sh\necho "$@" > {asked}\necho {world.token}\n')
    gh.chmod(gh.stat().st_mode | stat.S_IXUSR)
    env = world.env(PATH=f"{bin_dir}:/usr/bin:/bin")
    del env["GITHUB_TOKEN"]
    status, out, err = world.review(world.url, capsys=capsys, env=env)
    assert status == 0, err
    # gh is asked for its token of the host the requests go to (GITHUB_API_URL's: here the fake GitHub's).
    fake_host = world.fakes.github_url.split("://", 1)[1].rstrip("/")
    assert asked.read_text().split() == ["auth", "token", "--hostname", fake_host]
    assert "One risk" in out


def test_the_token_may_do_only_what_it_was_given(world: World, capsys) -> None:
    # A token that may read pull requests but not write them: the review is printed, posting it is refused.
    reader = world.fakes.call(
        world.github.add_user_token, PERSON, permissions={"pull_requests": "read", "contents": "read"}
    )
    status, out, err = world.review(world.url, "--post", capsys=capsys, env=world.env(GITHUB_TOKEN=reader))
    assert status == 1 and "f2 returns a constant." in out
    assert one_line(err).startswith("reviewer-app: review: reviewed, but not posted: GitHub refused review on")
    assert "Resource not accessible by personal access token" in err
    assert reader not in err
    assert world.reviews() == []
    # A token of someone with no role in the private repository does not see it: GitHub's 404.
    stranger = world.fakes.call(world.github.add_user_token, "stranger")
    world.anthropic.script_tool_answer(ANSWER)
    status, out, err = world.review(world.url, capsys=capsys, env=world.env(GITHUB_TOKEN=stranger))
    assert status == 1 and out == ""
    assert one_line(err) == f"reviewer-app: review: pull request {REPO}#1 not found (or the token cannot see it)"


def test_a_closed_pull_request_is_one_line_and_exit_1(world: World, capsys) -> None:
    world.fakes.call(world.github.close_pull, REPO, 1)
    status, out, err = world.review(world.url, capsys=capsys)
    assert status == 1 and out == ""
    assert one_line(err) == "reviewer-app: review: no review: the pull request was closed"
    assert world.anthropic.message_requests == []


def test_the_command_as_a_subprocess(world: World) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "reviewer_app.cli.main", "review", world.url],
        capture_output=True,
        text=True,
        env={**world.env(), "HOME": str(world.tmp_path)},
        cwd=world.tmp_path,
        timeout=DEADLINE,
    )
    assert done.returncode == 0, done.stderr
    assert "f2 returns a constant." in done.stdout
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert world.reviews() == []


class EnterpriseServer:
    """A GitHub Enterprise Server's address: its REST API at http://HOST/api/v3, here the fake GitHub behind that
    path (a proxy on a port of its own), so the command has to find the API from the pull request's URL."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.host = ""
        self.authorizations: list[str | None] = []  # each request's Authorization header, as the server got it
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread = threading.Thread(target=lambda: asyncio.run(self._serve()), daemon=True)

    async def _forward(self, request: web.Request) -> web.Response:
        self.authorizations.append(request.headers.get("Authorization"))
        url = f"{self.target}/{request.match_info['tail']}"
        headers = {k: v for k, v in request.headers.items() if k.lower() not in ("host", "content-length")}
        async with aiohttp.ClientSession() as session:
            async with session.request(
                request.method, url, params=request.query, headers=headers, data=await request.read()
            ) as answer:
                body = await answer.read()
                kept = {
                    k: v for k, v in answer.headers.items() if k.lower() not in ("content-length", "transfer-encoding")
                }
                return web.Response(status=answer.status, body=body, headers=kept)

    async def _record_only(self, request: web.Request) -> web.Response:
        self.authorizations.append(request.headers.get("Authorization"))
        return web.Response(status=404)

    async def _serve(self) -> None:
        self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._record_only)
        app.router.add_route("*", "/api/v3/{tail:.*}", self._forward)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        self.host = f"127.0.0.1:{runner.addresses[0][1]}"
        self._ready.set()
        await self._stop.wait()
        await runner.cleanup()

    def __enter__(self) -> EnterpriseServer:
        self._thread.start()
        assert self._ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._loop is not None and self._stop is not None
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)


def test_on_an_enterprise_server_the_api_is_found_from_the_pull_requests_url(world: World, capsys) -> None:
    # The server's token is named explicitly (--token-env): GITHUB_TOKEN, github.com's, never goes there.
    with EnterpriseServer(world.fakes.github_url) as ghes:
        env = world.env(GITHUB_TOKEN=GITHUB_COM_TOKEN, GHE_TOKEN=world.token)
        del env["GITHUB_API_URL"]  # not set: http://HOST/OWNER/REPO/pull/1 means http://HOST/api/v3
        url = f"http://{ghes.host}/{REPO}/pull/1"
        status, out, err = world.review(url, "--post", "--token-env", "GHE_TOKEN", capsys=capsys, env=env)
    assert status == 0, err
    [review] = world.reviews()
    assert review["user"]["login"] == PERSON and review["body"] in out
    assert ghes.authorizations and all(a is not None and world.token in a for a in ghes.authorizations)


GITHUB_COM_TOKEN = "ghp_the-person-s-github-com-token"


def test_github_token_never_reaches_another_host(world: World, capsys) -> None:
    """The attack: a pasted link to a host that is neither github.com nor GITHUB_API_URL's. No token of that host (no
    gh, no --token-env): the command stops with one line before it connects, so the server sees no request at all
    (not even one without Authorization: the pull request is not the person's to read there)."""
    with EnterpriseServer(world.fakes.github_url) as other:
        env = world.env(GITHUB_TOKEN=GITHUB_COM_TOKEN)
        del env["GITHUB_API_URL"]
        status, out, err = world.review(f"http://{other.host}/{REPO}/pull/1", "--post", capsys=capsys, env=env)
        also = world.review(f"http://{other.host}/{REPO}/pull/1", capsys=capsys, env=world.env())  # API URL is set
    assert status == 2 and out == ""
    line = one_line(err)
    assert line.startswith(f"reviewer-app: review: no token for {other.host}: GITHUB_TOKEN is sent only to github.com")
    assert "--token-env NAME" in line and f"gh auth login --hostname {other.host}" in line
    assert GITHUB_COM_TOKEN not in err
    # With GITHUB_API_URL set, the requests go to that API (where GITHUB_TOKEN belongs), never to the link's host.
    assert also[0] == 0, also[2]
    assert other.authorizations == []
    assert world.anthropic.review_requests  # the second run reviewed, through GITHUB_API_URL


def test_a_token_is_never_sent_in_clear_off_loopback(world: World, capsys) -> None:
    env = world.env(GHE_TOKEN=world.token)
    del env["GITHUB_API_URL"]
    status, out, err = world.review(
        f"http://ghe.example.com/{REPO}/pull/1", "--token-env", "GHE_TOKEN", capsys=capsys, env=env
    )
    assert status == 2 and out == ""
    assert one_line(err) == (
        "reviewer-app: review: refusing to send a token in clear to http://ghe.example.com: use https "
        "(plain http is for loopback only)"
    )
    assert world.token not in err


def test_the_readmes_quickstart_shows_both_ways_in_each_one_command() -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    quickstart = readme[readme.index("## Quickstart") : readme.index("### Run the tests")]
    blocks = [b.split("\n", 1)[1] for b in quickstart.split("```")[1::2]]
    commands = [[line for line in b.splitlines() if line.strip() and not line.startswith("#")] for b in blocks]
    one_pr, app = commands[0], commands[1]
    assert len(one_pr) == 1 and "reviewer-app review https://github.com/OWNER/REPO/pull/" in one_pr[0]
    assert len(app) == 1 and "reviewer-app serve" in app[0]
    assert quickstart.index("### Review one pull request") < quickstart.index("### Run the App")
    assert "cents" in quickstart[: quickstart.index("### Review one pull request")]  # the cost, before either


def test_the_cost_line_counts_every_kind_of_token_and_the_verification(world: World, capsys) -> None:
    """Issue 42: the line said "1 input and 219 output tokens" and left out the cache's tokens and the verification."""
    world.fakes.call(world.anthropic.clear_script)  # the fixture's answer, replaced by one that used the cache
    usage = {"input_tokens": 1, "output_tokens": 219, "cache_creation_input_tokens": 2297, "cache_read_input_tokens": 5}
    world.fakes.call(world.anthropic.script_tool_answer, ANSWER, usage=usage)
    status, _, err = world.review(world.url, capsys=capsys)
    assert status == 0, err
    line = one_line(err)
    assert "1 input, 219 output, 2,297 cache-write and 5 cache-read tokens (review)" in line
    assert "(verification)" in line and "about $" in line


def test_sarif_of_a_pull_request_names_its_repository_and_head(world: World, capsys) -> None:
    status, out, err = world.review(world.url, "--format", "sarif", capsys=capsys)
    assert status == 0, err
    [run] = json.loads(out)["runs"]
    head = world.github.pulls[(REPO, 1)].head_sha
    assert run["versionControlProvenance"] == [{"repositoryUri": f"https://github.com/{REPO}", "revisionId": head}]
    assert [r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in run["results"]] == [
        "src/widget.py"
    ]


def test_fail_on_gates_a_pull_requests_review_too(world: World, capsys) -> None:
    assert world.review(world.url, "--fail-on", "critical", capsys=capsys)[0] == 0  # a warning is no critical
    world.fakes.call(world.anthropic.script_tool_answer, ANSWER)
    assert world.review(world.url, "--fail-on", "warning", capsys=capsys)[0] == 3
