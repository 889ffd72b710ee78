"""The code around each change: scopes found by tree-sitter (or indentation), gaps filled, context marked and
numbered truly, read at the head commit through GitHub's API and cached by blob SHA."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from reviewer_app.core.diff import parse_patch
from reviewer_app.core.states import JobState
from reviewer_app.review.context import has_grammar, plan_context
from reviewer_app.review.prompt import SYSTEM_PROMPT, PromptFile, escape_frame_tags, render_file
from reviewer_app.review.repo_config import CONFIG_PATH
from tests.core.test_line_numbers import _history_cases, github_patch
from tests.fakes.github import pull_file
from tests.fakes.github.graphql import blob_reads
from tests.harness import REPO, harness
from tests.prompt_text import files_shown

ROW = re.compile(r"^(?P<old>[ \d]{5}) (?P<new>[ \d]{5}) (?P<mark>[-+ .]) (?P<text>.*)$", re.S)


def diff_between(tmp: Path, old: str, new: str, path: str = "f.py") -> str:
    a, b = tmp / "a", tmp / "b"
    a.write_text(old)
    b.write_text(new)
    out = subprocess.run(["git", "diff", "--no-index", "--no-color", "--", str(a), str(b)], capture_output=True)
    return github_patch(out.stdout.decode())


def shown(path: str, patch: str, head: str, **kwargs: int) -> tuple[str, object]:
    diff = parse_patch(path, patch)
    plan = plan_context(diff, head, **kwargs)
    text = render_file(
        PromptFile(path, diff, head_lines=tuple(head.split("\n")), windows=plan.windows, context_note=plan.note)
    )
    return text, plan


def check_numbers(text: str, old: str, new: str) -> int:
    """Every numbered row is its line on its side; returns how many context ('.') rows there were."""
    old_lines, new_lines, context = old.split("\n"), new.split("\n"), 0
    for row in text.split("\n"):
        match = ROW.match(row)
        if not match:
            continue
        text = match["text"].rstrip("\r")
        if match["old"].strip():
            assert escape_frame_tags(old_lines[int(match["old"]) - 1].rstrip("\r")) == text, row
        if match["new"].strip():
            assert escape_frame_tags(new_lines[int(match["new"]) - 1].rstrip("\r")) == text, row
        context += match["mark"] == "."
    return context


def module(body: list[str], before: int = 80, after: int = 80) -> str:
    head = [f"CONSTANT_{i} = {i}" for i in range(before)]
    tail = [f"OTHER_{i} = {i}" for i in range(after)]
    return "\n".join([*head, "", *body, "", *tail]) + "\n"


# The case: two hunks 13 lines apart inside one function; the lines between make the change significant.
FUNCTION = [
    "def normalize(value, ctx):",
    "    token = value.strip()",
    "    lowered = token.lower()",
    *[f"    step_{i} = prepare(token, {i})" for i in range(13)],
    "    if ctx.token_normalize_func is not None:",
    "        token = ctx.token_normalize_func(lowered)",
    "    return token",
]


def test_two_hunks_in_one_function_show_the_function_and_the_lines_between(tmp_path: Path) -> None:
    old = module(FUNCTION)
    new_body = [ln.replace("lowered = token.lower()", "pass") for ln in FUNCTION]
    new_body = [ln.replace("token = value.strip()", "token = value") for ln in new_body]
    new_body[-2] = "        token = ctx.token_normalize_func(token)"
    new = module(new_body)
    text, plan = shown("src/core.py", diff_between(tmp_path, old, new, "core.py"), new)
    assert "def normalize(value, ctx):" in text and "step_6 = prepare(token, 6)" in text
    assert "if ctx.token_normalize_func is not None:" in text
    assert plan.by_parser == plan.hunks >= 1
    assert check_numbers(text, old, new) > 0
    assert "CONSTANT_10 = 10" not in text and "OTHER_40 = 40" not in text
    assert "found by tree-sitter" in plan.note and "not shown" in plan.note


@pytest.mark.parametrize(
    ("path", "lines", "changed", "expect"),
    [
        (
            "web/app.ts",
            [
                "export class Cart {",
                "  items: number[] = [];",
                "  total(): number {",
                "    let t = 0;",
                "    for (const i of this.items) { t += i; }",
                "    return t;",
                "  }",
                "}",
            ],
            3,
            "export class Cart {",
        ),
        (
            "web/app.js",
            [
                "function total(items) {",
                "  let t = 0;",
                "  for (const i of items) {",
                "    t += i;",
                "  }",
                "  return t;",
                "}",
            ],
            3,
            "function total(items) {",
        ),
        (
            "srv/cart.go",
            [
                "func (c *Cart) Total() int {",
                "\tt := 0",
                "\tfor _, i := range c.items {",
                "\t\tt += i",
                "\t}",
                "\treturn t",
                "}",
            ],
            3,
            "func (c *Cart) Total() int {",
        ),
        (
            "lib/cart.rb",
            [
                "class Cart",
                "  def total",
                "    t = 0",
                "    @items.each do |i|",
                "      t += i",
                "    end",
                "    t",
                "  end",
                "end",
            ],
            4,
            "  def total",
        ),
    ],
)
def test_scopes_in_other_languages(tmp_path: Path, path: str, lines: list[str], changed: int, expect: str) -> None:
    filler = ["// filler line"] * 60 if not path.endswith(".rb") else ["# filler line"] * 60
    old = "\n".join([*filler, *lines, *filler]) + "\n"
    edited = list(lines)
    edited[changed] = edited[changed] + "  // changed" if not path.endswith(".rb") else edited[changed] + "  # changed"
    new = "\n".join([*filler, *edited, *filler]) + "\n"
    text, plan = shown(path, diff_between(tmp_path, old, new), new)
    assert expect in text and lines[-1] in text
    if path.endswith(".rb"):
        assert not has_grammar(path) and plan.by_indentation == 1
    else:
        assert has_grammar(path) and plan.by_parser == 1
    check_numbers(text, old, new)


def test_a_small_file_is_shown_whole(tmp_path: Path) -> None:
    old = "\n".join(f"x{i} = {i}" for i in range(30)) + "\n"
    new = old.replace("x20 = 20", "x20 = 21")
    text, plan = shown("small.py", diff_between(tmp_path, old, new), new)
    assert "x0 = 0" in text and "x29 = 29" in text and "whole file" in plan.note
    check_numbers(text, old, new)


def test_a_long_scope_shows_its_signature_and_the_lines_around_the_change(tmp_path: Path) -> None:
    body = ["def long_function(a, b):", *[f"    v{i} = a + {i}" for i in range(300)], "    return b"]
    old = module(body)
    new = old.replace("    v150 = a + 150", "    v150 = a - 150")
    text, plan = shown("big.py", diff_between(tmp_path, old, new), new)
    assert "def long_function(a, b):" in text and "v150 = a - 150" in text
    assert "v20 = a + 20" not in text
    check_numbers(text, old, new)


def test_context_lines_per_file_are_capped(tmp_path: Path) -> None:
    functions = [
        line
        for k in range(6)
        for line in [f"def f{k}(x):", *[f"    y{i} = x * {i}" for i in range(60)], "    return x", ""]
    ]
    old = module(functions)
    new = old
    for k in range(6):
        new = new.replace(f"def f{k}(x):\n    y0 = x * 0", f"def f{k}(x):\n    y0 = x * 100")
    text, plan = shown("many.py", diff_between(tmp_path, old, new), new, max_context_lines=80)
    assert plan.context_lines <= 80
    check_numbers(text, old, new)


def test_context_numbers_hold_on_the_projects_own_history() -> None:
    cases = [c for c in _history_cases() if c.new and c.old and c.path.endswith((".py", ".md", ".toml", ".sql"))]
    if not cases:
        pytest.skip("no git history in this checkout")
    context_rows = 0
    for case in cases:
        text, _ = shown(case.path, case.patch, case.new)
        context_rows += check_numbers(text, case.old, case.new)
    assert context_rows > 100


def test_the_prompt_invites_findings_outside_the_diff_and_warns_about_missing_context() -> None:
    assert "Comment only on lines shown in the diff" not in SYSTEM_PROMPT
    assert "caller it breaks" in SYSTEM_PROMPT and "moved into the review's body" in SYSTEM_PROMPT
    assert "Do not claim a name is undefined" in SYSTEM_PROMPT
    assert "'.' unchanged code shown from the file around the change" in SYSTEM_PROMPT


# --- end to end ----------------------------------------------------------------------------------------------------


def core_change(tmp: Path) -> tuple[str, str, dict]:
    old = module(FUNCTION)
    new = old.replace(
        "        token = ctx.token_normalize_func(lowered)", "        token = ctx.token_normalize_func(token)"
    )
    return old, new, pull_file("src/core.py", diff_between(tmp, old, new))


async def test_the_model_sees_the_enclosing_function_read_once_per_blob(tmp_path) -> None:
    old, new, entry = core_change(tmp_path)
    async with harness(tmp_path) as h:
        h.anthropic.script_tool_answer(
            {
                "summary": "One issue.",
                "comments": [{"path": "src/core.py", "line": 84, "body": "lowered is now unused."}],
            }
        )
        pull = h.github.add_pull(REPO, 1, files=[entry])
        h.github.set_file(REPO, "src/core.py", new, ref=pull.head_sha)
        answer = await h.deliver("pull_request", h.pr_payload(pull))
        await h.wait_state(answer["job_id"], JobState.SUCCEEDED)
        text = files_shown(h.anthropic.message_requests[0])
        assert check_numbers(text, old, new) > 0
        assert "lowered = token.lower()" in text and "def normalize(value, ctx):" in text
        [review] = h.reviews()
        assert "lowered is now unused." in review["body"]  # a finding on a context line: into the body
        # A second review of the same head reads nothing again: the head file is cached by its blob SHA.
        answer = await h.deliver("issue_comment", h.comment_payload(pull, "/review full"))
        await h.wait_state(answer["job_id"], JobState.SUCCEEDED)
        assert blob_reads(h.github, "src/core.py") == [pull.head_sha]


async def test_context_missing_is_said_and_context_can_be_turned_off(tmp_path) -> None:
    old, new, entry = core_change(tmp_path)
    async with harness(tmp_path) as h:
        pull, job_id = await h.open_pr(files=[entry])  # the head file is not served
        await h.wait_state(job_id, JobState.SUCCEEDED)
        assert "[no context: GitHub did not serve its contents" in files_shown(h.anthropic.message_requests[0])
        assert blob_reads(h.github, "src/core.py") == [pull.head_sha]
        h.github.set_file(REPO, CONFIG_PATH, "context: false\n")
        h.github.set_file(REPO, "src/core.py", new, ref=pull.head_sha)
        answer = await h.deliver("issue_comment", h.comment_payload(pull, "/review full"))
        await h.wait_state(answer["job_id"], JobState.SUCCEEDED)
        text = files_shown(h.anthropic.message_requests[1])
        assert "lowered = token.lower()" not in text and blob_reads(h.github, "src/core.py") == [pull.head_sha]


async def test_a_generated_header_above_the_diff_is_found_in_the_head_file(tmp_path) -> None:
    head = (
        "# This file is generated by tools/gen.py. Do not edit it by hand.\n"
        + "\n".join(f"T{i} = {i}" for i in range(200))
        + "\n"
    )
    entry = pull_file("src/table.py", "@@ -100,3 +100,3 @@\n T98 = 98\n-T99 = 0\n+T99 = 99\n T100 = 100")
    async with harness(tmp_path) as h:
        pull = h.github.add_pull(REPO, 1, files=[entry])
        h.github.set_file(REPO, "src/table.py", head, ref=pull.head_sha)
        answer = await h.deliver("pull_request", h.pr_payload(pull))
        job = await h.wait_state(answer["job_id"], JobState.SUCCEEDED)
        assert h.anthropic.message_requests == []  # nothing left worth the model's attention
        assert "generated (its header says so)" in h.reviews()[0]["body"]
        assert job.details.counts.files_reviewed == 0
