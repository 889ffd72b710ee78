"""The verifier sees what a finding depends on, end to end against the fakes: the repository comes from the fake
GitHub's archive route, the finding quotes a call into a file the pull request does not touch, and the verification
request carries that callee's code; a verdict that asks for one more symbol gets it from the repository in a second,
final request whose verdict is the one applied."""

from __future__ import annotations

import difflib
from typing import Any

from reviewer_app.core.states import JobState
from tests.fakes.github import Pull, pull_file
from tests.harness import REPO, Harness, harness
from tests.prompt_text import user_text

# Unchanged by the pull request: the callee, whose contract (None for an empty header) decides the finding.
TOKENS = '''"""Bearer tokens."""


def parse_token(header):
    """The token in an Authorization header, or None when there is none."""
    if not header:
        return None
    return Token(header.removeprefix("Bearer "))


def load_user(token_id):
    return USERS.get(token_id)
'''
HANDLER = """from tokens import parse_token


def handle(request):
    return "ok"
"""
HANDLER_HEAD = """from tokens import parse_token


def handle(request):
    token = parse_token(request.headers.get("Authorization"))
    return token.user
"""
FINDING = {
    "path": "handler.py",
    "line": 5,
    "severity": "critical",
    "body": "token is None when the Authorization header is missing: token.user raises AttributeError.",
    "quote": 'token = parse_token(request.headers.get("Authorization"))',
    "failure": "A request without an Authorization header crashes the handler.",
}


def modified(path: str, old: str, new: str) -> dict[str, Any]:
    lines = list(difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=3))[2:]
    return pull_file(path, "\n".join(lines), status="modified")


async def open_change(h: Harness) -> tuple[Pull, int]:
    h.github.set_file(REPO, "tokens.py", TOKENS)
    h.github.set_file(REPO, "handler.py", HANDLER)
    pull = h.github.add_pull(REPO, 1, files=[modified("handler.py", HANDLER, HANDLER_HEAD)])
    h.github.set_file(REPO, "handler.py", HANDLER_HEAD, ref=pull.head_sha)
    answer = await h.deliver("pull_request", h.pr_payload(pull))
    return pull, answer["job_id"]


async def test_the_verifier_receives_the_cross_file_code_a_finding_quotes(tmp_path) -> None:
    async with harness(tmp_path, REVIEWER_VERIFY="1") as h:
        h.anthropic.script_tool_answer({"summary": "A crash.", "comments": [FINDING]})
        h.anthropic.script_verify_answer([{"id": "F1", "verdict": "confirmed", "confidence": 95, "reason": "None."}])
        _, job_id = await open_change(h)
        await h.wait_state(job_id, JobState.SUCCEEDED)
        [verify] = h.anthropic.verify_requests
        text = user_text(verify)
        # The callee's definition, from tokens.py (a file the pull request does not touch), with its contract.
        assert (
            '<code path="tokens.py" at="head" lines="4-8" what="definition of parse_token, called by the change">'
            in text
        )
        assert '    5       """The token in an Authorization header, or None when there is none."""' in text
        assert text.index("<finding id=") < text.index('<code path="tokens.py"') < text.index("</finding>")
        assert [c["line"] for c in h.github.review_comments_for(REPO, 1)] == [5]


async def test_a_finding_uncertain_for_lack_of_code_gets_one_lookup_and_that_verdict_decides(tmp_path) -> None:
    async with harness(tmp_path, REVIEWER_VERIFY="1") as h:
        h.anthropic.script_tool_answer({"summary": "A crash.", "comments": [FINDING]})
        h.anthropic.script_verify_answer(
            [{"id": "F1", "verdict": "uncertain", "confidence": 30, "reason": "Unseen.", "need": "load_user"}]
        )
        h.anthropic.script_verify_answer([{"id": "F1", "verdict": "confirmed", "confidence": 90, "reason": "Seen."}])
        _, job_id = await open_change(h)
        job = await h.wait_state(job_id, JobState.SUCCEEDED)
        first, second = h.anthropic.verify_requests
        assert "<lookup" not in user_text(first)
        looked_up = user_text(second)
        assert looked_up.count("<finding id=") == 1
        assert '<lookup need="load_user">' in looked_up and "def load_user(token_id):" in looked_up
        assert "This is the last look: leave need out." in looked_up
        assert job.answer is not None
        assert [(c.verdict, c.confidence) for c in job.answer.comments] == [("confirmed", 90)]
        assert [c["line"] for c in h.github.review_comments_for(REPO, 1)] == [5]


async def test_a_second_need_is_not_answered(tmp_path) -> None:
    async with harness(tmp_path, REVIEWER_VERIFY="1") as h:
        h.anthropic.script_tool_answer({"summary": "A crash.", "comments": [FINDING]})
        uncertain = {"id": "F1", "verdict": "uncertain", "confidence": 30, "reason": "Unseen.", "need": "load_user"}
        h.anthropic.script_verify_answer([uncertain], times=2)
        _, job_id = await open_change(h)
        job = await h.wait_state(job_id, JobState.SUCCEEDED)
        assert len(h.anthropic.verify_requests) == 2  # one lookup per finding, then its verdict stands
        assert job.answer is not None and [w.reason for w in job.answer.withheld] == ["low confidence"]


async def test_without_the_repository_the_verifier_is_offered_no_lookup_and_a_need_is_ignored(tmp_path) -> None:
    async with harness(tmp_path, REVIEWER_VERIFY="1") as h:
        h.github.set_file(REPO, ".github/reviewer.yml", "codebase: false\n")
        h.anthropic.script_tool_answer({"summary": "A crash.", "comments": [FINDING]})
        h.anthropic.script_verify_answer(
            [{"id": "F1", "verdict": "uncertain", "confidence": 30, "reason": "Unseen.", "need": "load_user"}]
        )
        _, job_id = await open_change(h)
        job = await h.wait_state(job_id, JobState.SUCCEEDED)
        [verify] = h.anthropic.verify_requests  # nothing could answer a need: no second request
        system = verify.system if isinstance(verify.system, str) else " ".join(b["text"] for b in verify.system)
        assert '"need"' not in system and "need" not in str(verify.body["tools"])
        assert "uncertain" in system  # the rest of the instructions are the usual ones
        assert job.answer is not None and [w.reason for w in job.answer.withheld] == ["low confidence"]


async def test_a_lookup_of_the_findings_own_long_file_opens_at_the_finding(tmp_path) -> None:
    constants = "".join(f"X_{i} = {i}\n" for i in range(240))
    after = "".join(f"Y_{i} = {i}\n" for i in range(200))
    old, new = f"{constants}{HANDLER}{after}", f"{constants}{HANDLER_HEAD}{after}"  # a change at line 245 of 446
    line = new.splitlines().index('    token = parse_token(request.headers.get("Authorization"))') + 1
    async with harness(tmp_path, REVIEWER_VERIFY="1") as h:
        h.anthropic.script_tool_answer({"summary": "A crash.", "comments": [{**FINDING, "line": line}]})
        h.anthropic.script_verify_answer(
            [{"id": "F1", "verdict": "uncertain", "confidence": 30, "reason": "Unseen.", "need": "handler.py"}]
        )
        h.anthropic.script_verify_answer([{"id": "F1", "verdict": "confirmed", "confidence": 90, "reason": "Seen."}])
        h.github.set_file(REPO, "tokens.py", TOKENS)
        h.github.set_file(REPO, "handler.py", old)
        pull = h.github.add_pull(REPO, 1, files=[modified("handler.py", old, new)])
        h.github.set_file(REPO, "handler.py", new, ref=pull.head_sha)
        answer = await h.deliver("pull_request", h.pr_payload(pull))
        await h.wait_state(answer["job_id"], JobState.SUCCEEDED)
        _, second = h.anthropic.verify_requests
        looked_up = user_text(second)
        # Not the file's first 200 lines (constants the verifier had no use for): the finding's lines and what follows
        # them (the places that name what the finding quotes, parse_token, are among them).
        lookup = looked_up.split('<lookup need="handler.py">')[1].split("</lookup>")[0]
        assert lookup.startswith("\nhandler.py: 446 lines; the parts that show the finding's lines and ")
        assert "from tokens import parse_token" in lookup and f"{line + 40:>6} | Y_" in lookup
        assert "X_100 = 100" not in lookup
