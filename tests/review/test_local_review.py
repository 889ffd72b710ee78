"""`reviewer-app review --local [BASE]`: a real git repository made for each test (a bare "origin", a clone with a
topic branch), reviewed by the real command line against the fake Anthropic. No GitHub token is set, and the fake
GitHub, served alongside, must see no request at all: nothing is sent but the model's."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from reviewer_app.cli.main import main
from reviewer_app.review.prompt import SYSTEM_PROMPT
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.github import FakeGitHub
from tests.fakes.threads import FakesThread
from tests.prompt_text import files_shown

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
# OASIS's SARIF 2.1.0 schema (sarif-schema-2.1.0.json of the standard's errata 01), as published.
SARIF_SCHEMA = json.loads((FIXTURES / "sarif-schema-2.1.0.json").read_text())
BASE_SOURCE = "".join(f"def f{i}():\n    return {i}\n" for i in range(1, 6))
CHANGED_SOURCE = BASE_SOURCE.replace("    return 2\n", "    return 2 + 0\n")
ANSWER = {
    "summary": "One risk: f2 adds zero.",
    "comments": [
        {
            "path": "src/widget.py",
            "line": 4,
            "side": "RIGHT",
            "severity": "warning",
            "body": "f2 adds zero \x1b[31mfor nothing.",
            "quote": "    return 2 + 0",
            "suggestion": "    return 2",
        }
    ],
}
DEADLINE = 60.0


def git(where: Path, *args: str) -> str:
    env = {
        "GIT_AUTHOR_NAME": "Dev",
        "GIT_AUTHOR_EMAIL": "dev@example.com",
        "GIT_COMMITTER_NAME": "Dev",
        "GIT_COMMITTER_EMAIL": "dev@example.com",
        "HOME": str(where),
        "PATH": os.environ["PATH"],
    }
    done = subprocess.run(["git", *args], cwd=where, env=env, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def write(root: Path, path: str, text: str) -> None:
    (root / path).parent.mkdir(parents=True, exist_ok=True)
    (root / path).write_text(text)


class Checkout:
    """A clone of a bare origin whose main holds README.md and src/widget.py; HEAD on branch topic."""

    def __init__(self, tmp: Path, fakes: FakesThread, monkeypatch: pytest.MonkeyPatch) -> None:
        self.fakes, self.monkeypatch, self.tmp = fakes, monkeypatch, tmp
        self.answer: dict[str, Any] = ANSWER  # what the model answers the review's request
        self.origin = tmp / "origin.git"
        self.root = tmp / "widgets"
        self.root.mkdir()
        git(tmp, "init", "-q", "--bare", "-b", "main", str(self.origin))
        git(self.root, "init", "-q", "-b", "main")
        write(self.root, "README.md", "Widgets.\n")
        write(self.root, "src/widget.py", BASE_SOURCE)
        git(self.root, "add", ".")
        git(self.root, "commit", "-q", "-m", "Widgets")
        git(self.root, "remote", "add", "origin", str(self.origin))
        git(self.root, "push", "-q", "origin", "main")
        git(self.root, "remote", "set-head", "origin", "main")
        git(self.root, "checkout", "-q", "-b", "topic")

    def commit(self, message: str, files: dict[str, str]) -> str:
        for path, text in files.items():
            write(self.root, path, text)
        git(self.root, "add", ".")
        git(self.root, "commit", "-q", "-m", message)
        return git(self.root, "rev-parse", "HEAD")

    @property
    def anthropic(self) -> FakeAnthropic:
        return self.fakes.anthropic

    def env(self) -> dict[str, str]:
        return {
            "ANTHROPIC_API_KEY": "sk-ant-test",
            "ANTHROPIC_BASE_URL": self.fakes.anthropic_url,
            # Were anything to ask GitHub, it would ask the fake, which counts it.
            "GITHUB_API_URL": self.fakes.github_url,
            "REVIEWER_ENV_FILE": str(self.tmp / "absent.env"),
            "PATH": os.environ["PATH"],
            "HOME": str(self.tmp),
        }

    def review(self, *args: str, capsys: pytest.CaptureFixture[str], cwd: Path | None = None) -> Any:
        for name in list(os.environ):
            if name.startswith(("GITHUB_", "REVIEWER_", "ANTHROPIC_", "DATABASE_", "GIT_")) or name in (
                "GH_TOKEN",
                "LOG_LEVEL",
                "NO_COLOR",
            ):
                self.monkeypatch.delenv(name)
        for name, value in self.env().items():
            self.monkeypatch.setenv(name, value)
        self.monkeypatch.chdir(cwd or self.root)
        self.fakes.call(self.anthropic.script_tool_answer, self.answer)
        status = main(["review", *args])
        out, err = capsys.readouterr()
        return status, out, err

    def github_requests(self) -> list[Any]:
        return self.fakes.call(lambda: list(self.fakes.github.requests))


@pytest.fixture(autouse=True)
def logging_as_it_was() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.fixture
def checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Checkout]:
    with FakesThread(FakeGitHub(), FakeAnthropic()) as fakes:
        yield Checkout(tmp_path, fakes, monkeypatch)


def test_the_topic_branchs_commits_are_reviewed_by_the_apps_stages_with_nothing_sent_but_the_model_request(
    checkout: Checkout, capsys
) -> None:
    checkout.commit("Make f2 explicit", {"src/widget.py": CHANGED_SOURCE})
    head = checkout.commit("Add notes", {"docs/notes.md": "Notes.\n"})
    status, out, err = checkout.review("--local", capsys=capsys)
    assert status == 0, err
    # The App's prompt, on the two commits since the merge base with origin/main: the changed files, not README.md.
    [asked] = checkout.anthropic.review_requests
    assert asked.system[0]["text"] == SYSTEM_PROMPT
    shown = files_shown(asked)
    assert "src/widget.py" in shown and "return 2 + 0" in shown and "docs/notes.md" in shown
    assert "README.md" not in shown
    # The finding's quote was checked against the file at HEAD (kept), and the verification pass asked.
    assert len(checkout.anthropic.verify_requests) == 1
    # Printed as the App would post it (stdout is no terminal: markdown), for the head reviewed.
    assert "f2 adds zero" in out and head[:12] in err
    assert "the merge base with origin/main" in err
    # Nothing asked of GitHub, and no token was there to ask with.
    assert checkout.github_requests() == []


def test_a_named_base_reviews_only_the_commits_since_it(checkout: Checkout, capsys) -> None:
    first = checkout.commit("Make f2 explicit", {"src/widget.py": CHANGED_SOURCE})
    checkout.commit("Add notes", {"docs/notes.md": "Notes.\n"})
    status, _, err = checkout.review("--local", first, capsys=capsys)
    assert status == 0, err
    [asked] = checkout.anthropic.review_requests
    assert "docs/notes.md" in files_shown(asked) and "src/widget.py" not in files_shown(asked)


def test_without_a_remote_the_last_commit_is_reviewed(checkout: Checkout, capsys) -> None:
    git(checkout.root, "remote", "remove", "origin")
    git(checkout.root, "checkout", "-q", "main")
    checkout.commit("Make f2 explicit", {"src/widget.py": CHANGED_SOURCE})
    status, _, err = checkout.review("--local", capsys=capsys)
    assert status == 0, err
    assert "HEAD's parent" in err
    [asked] = checkout.anthropic.review_requests
    assert "src/widget.py" in files_shown(asked) and "README.md" not in files_shown(asked)


def test_nothing_to_review_asks_no_model(checkout: Checkout, capsys) -> None:
    status, out, err = checkout.review("--local", "main", capsys=capsys)
    assert (status, out) == (0, "")
    assert "nothing to review" in err
    # SARIF (or JSON) for a CI step that uploads it: a valid document with no result.
    status, out, _ = checkout.review("--local", "main", "--format", "sarif", capsys=capsys)
    assert status == 0
    sarif = json.loads(out)
    jsonschema.validate(sarif, SARIF_SCHEMA)
    assert sarif["runs"][0]["results"] == []
    assert checkout.anthropic.review_requests == []


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("--local", "no-such-branch"), "'no-such-branch' is not a commit of this repository"),
        (("--local", "--post"), "a local review has none to post on"),
        (("https://github.com/o/r/pull/1", "--local"), "not both"),
        ((), "say what to review"),
    ],
)
def test_a_wrong_local_command_line_is_one_line_and_exit_2(checkout: Checkout, capsys, args, said: str) -> None:
    checkout.commit("Make f2 explicit", {"src/widget.py": CHANGED_SOURCE})
    status, out, err = checkout.review(*args, capsys=capsys)
    assert status == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and said in err


def test_outside_a_git_checkout_is_one_line_and_exit_2(checkout: Checkout, capsys, tmp_path: Path) -> None:
    elsewhere = tmp_path / "not-a-repo"
    elsewhere.mkdir()
    status, _, err = checkout.review("--local", capsys=capsys, cwd=elsewhere)
    assert status == 2
    assert len(err.strip().splitlines()) == 1 and "--local:" in err


def test_sarif_is_valid_sarif_2_1_0_with_one_result_per_finding(checkout: Checkout, capsys) -> None:
    checkout.commit("Make f2 explicit", {"src/widget.py": CHANGED_SOURCE})
    status, out, err = checkout.review("--local", "--format", "sarif", capsys=capsys)
    assert status == 0, err
    sarif = json.loads(out)
    jsonschema.validate(sarif, SARIF_SCHEMA)
    [run] = sarif["runs"]
    [result] = run["results"]
    assert result["level"] == "warning" and result["ruleId"] == "reviewer-app/warning"
    assert run["tool"]["driver"]["rules"][result["ruleIndex"]]["id"] == result["ruleId"]
    place = result["locations"][0]["physicalLocation"]
    assert place["artifactLocation"]["uri"] == "src/widget.py" and place["region"]["startLine"] == 4
    assert "f2 adds zero" in result["message"]["text"]


def test_json_counts_every_kind_of_token_and_the_verification(checkout: Checkout, capsys) -> None:
    checkout.commit("Make f2 explicit", {"src/widget.py": CHANGED_SOURCE})
    status, out, err = checkout.review("--local", "--format", "json", capsys=capsys)
    assert status == 0, err
    data = json.loads(out)
    [finding] = data["findings"]
    assert (finding["path"], finding["line"], finding["severity"]) == ("src/widget.py", 4, "warning")
    usage = data["usage"]
    assert set(usage["by_kind"]) == {"review", "verification"}
    requests = [*checkout.anthropic.review_requests, *checkout.anthropic.verify_requests]
    assert len(requests) == 2
    assert usage["input_tokens"] > 0 and usage["output_tokens"] > 0
    assert {"cache_creation_tokens", "cache_read_tokens"} <= set(usage)
    # The one line on stderr says all four kinds, for the review and the verification.
    last = err.strip().splitlines()[-1]
    assert "cache-write" in last and "cache-read" in last and "(verification)" in last


def test_text_gives_each_finding_once_with_no_html_no_anchor_and_no_escape(checkout: Checkout, capsys) -> None:
    checkout.commit("Make f2 explicit", {"src/widget.py": CHANGED_SOURCE})
    status, out, err = checkout.review("--local", "--format", "text", capsys=capsys)
    assert status == 0, err
    assert out.count("for nothing") == 1
    assert "WARNING  src/widget.py:4" in out
    assert "  |     return 2" in out  # the fix
    assert "<" not in out and "](" not in out and "http" not in out
    assert "\x1b" not in out  # no colour off a terminal, and the model's own escape sequence removed


def test_fail_on_exits_3_when_a_finding_is_that_severe(checkout: Checkout, capsys) -> None:
    checkout.commit("Make f2 explicit", {"src/widget.py": CHANGED_SOURCE})
    status, _, err = checkout.review("--local", "--fail-on", "warning", capsys=capsys)
    assert status == 3, err


def install_documented_hook(checkout: Checkout) -> None:
    """The pre-push hook docs/local-review.md shows, installed as it says (this interpreter for `reviewer-app`)."""
    hook = checkout.root / ".git" / "hooks" / "pre-push"
    doc = (Path(__file__).resolve().parents[2] / "docs" / "local-review.md").read_text()
    script = doc.split("```sh\n#!/bin/sh\n", 1)[1].split("```", 1)[0]
    hook.write_text("#!/bin/sh\n" + script.replace("reviewer-app ", f"{sys.executable} -m reviewer_app.cli.main ", 1))
    hook.chmod(0o755)


def push(checkout: Checkout) -> subprocess.CompletedProcess[str]:
    checkout.fakes.call(checkout.anthropic.script_tool_answer, checkout.answer)
    return subprocess.run(
        ["git", "push", "origin", "topic"],
        cwd=checkout.root,
        env={**checkout.env(), "GIT_AUTHOR_NAME": "Dev", "GIT_COMMITTER_NAME": "Dev"},
        capture_output=True,
        text=True,
        timeout=DEADLINE,
    )


def test_in_a_pre_push_hook_the_push_is_reviewed(checkout: Checkout) -> None:
    install_documented_hook(checkout)
    checkout.commit("Make f2 explicit", {"src/widget.py": CHANGED_SOURCE})
    pushed = push(checkout)
    assert pushed.returncode == 0, pushed.stderr
    assert len(checkout.anthropic.review_requests) == 1
    assert "WARNING  src/widget.py:4" in pushed.stdout + pushed.stderr
    assert git(checkout.tmp, "--git-dir", str(checkout.origin), "rev-parse", "topic") == git(
        checkout.root, "rev-parse", "HEAD"
    )


def test_in_a_pre_push_hook_a_critical_finding_stops_the_push(checkout: Checkout) -> None:
    install_documented_hook(checkout)
    checkout.answer = {**ANSWER, "comments": [{**ANSWER["comments"][0], "severity": "critical"}]}
    checkout.commit("Make f2 explicit", {"src/widget.py": CHANGED_SOURCE})
    pushed = push(checkout)
    assert pushed.returncode != 0
    assert "CRITICAL  src/widget.py:4" in pushed.stdout + pushed.stderr
    branches = git(checkout.tmp, "--git-dir", str(checkout.origin), "branch", "--list", "topic")
    assert branches == ""


def test_a_local_review_shows_the_callers_of_what_changed_from_the_checkouts_own_archive(
    checkout: Checkout, capsys
) -> None:
    # The codebase at the head comes from `git archive` of the base commit: a caller in a file the commits do not
    # touch reaches the model, and nothing is asked of GitHub.
    checkout.commit("Use f2", {"src/app.py": "from widget import f2\n\n\ndef run():\n    return f2() * 10\n"})
    git(checkout.root, "push", "-q", "origin", "topic:main")
    git(checkout.root, "fetch", "-q", "origin")
    checkout.commit("Make f2 explicit", {"src/widget.py": CHANGED_SOURCE})
    status, _, err = checkout.review("--local", capsys=capsys)
    assert status == 0, err
    [asked] = checkout.anthropic.review_requests
    text = "".join(b.get("text", "") for b in asked.messages[0]["content"] if isinstance(b, dict))
    assert 'path="src/app.py" lines="4-5" why="caller of f2, in run"' in text
    assert checkout.github_requests() == []
