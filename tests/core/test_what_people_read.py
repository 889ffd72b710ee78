"""What people read, end to end against the fakes: severity, one summary, folded skips, LEFT and off-diff comments,
a check run worth opening, committable suggestions, and Markdown that survives GitHub's rendering."""

from __future__ import annotations

import difflib
import hashlib
import html
import re
from typing import Any

import cmarkgfm
from cmarkgfm.cmark import Options

from reviewer_app.core.markers import make_marker, parse_markers
from reviewer_app.core.states import JobState
from tests.fakes.github import added_file, pull_file
from tests.harness import REPO, SOURCE, harness
from tests.prompt_text import user_text


def diff_anchor(path: str, line: int, side: str = "R") -> str:
    return f"https://github.com/{REPO}/pull/1/files#diff-{hashlib.sha256(path.encode()).hexdigest()}{side}{line}"


def patch_between(old: list[str], new: list[str], context: int = 1) -> str:
    """GitHub's patch of a file (hunks only, no file headers)."""
    lines = list(difflib.unified_diff(old, new, lineterm="", n=context))
    return "\n".join(lines[2:])


async def test_severity_shows_inline_and_in_the_body_most_severe_first_with_links_suggestions_folded(tmp_path) -> None:
    async with harness(tmp_path) as h:
        h.anthropic.script_tool_answer(
            {
                "summary": "Watch the error paths.",
                "comments": [
                    {"path": "src/widget.py", "line": 2, "severity": "suggestion", "body": "Name the constant."},
                    {"path": "src/widget.py", "line": 4, "severity": "critical", "body": "f2 returns the wrong value."},
                    {
                        "path": "src/widget.py",
                        "line": 6,
                        "severity": "warning",
                        "body": "f3 ignores errors.\n\nDetails.",
                    },
                ],
            }
        )
        pull, job_id = await h.open_pr()
        await h.wait_state(job_id, JobState.SUCCEEDED)
        comments = {c["line"]: c["body"] for c in h.github.review_comments_for(REPO, 1)}
        assert comments[4].startswith("**🔴 Critical**\n\nf2 returns the wrong value.")
        assert comments[6].startswith("**🟠 Warning**")
        assert 2 not in comments  # suggestion-level findings are listed folded, not posted as threads
        [review] = h.reviews()
        body = review["body"]
        findings = body.split("### Findings", 1)[1].split("\n\n<details>", 1)[0].strip().splitlines()
        assert findings == [
            f"- 🔴 Critical · [`src/widget.py` line 4]({diff_anchor('src/widget.py', 4)}): f2 returns the wrong value.",
            f"- 🟠 Warning · [`src/widget.py` line 6]({diff_anchor('src/widget.py', 6)}): f3 ignores errors.",
        ]
        folded = body.split("<summary>1 more finding, folded</summary>", 1)[1].split("</details>")[0]
        permalink = f"https://github.com/{REPO}/blob/{pull.head_sha}/src/widget.py#L2"
        assert f"- 🔵 Suggestion · [`src/widget.py` line 2]({permalink}): Name the constant." in folded
        assert "3 findings (1 critical, 1 warning, 1 suggestion)" in body


async def test_nits_are_folded_when_the_repository_wants_them_and_not_shown_otherwise(tmp_path) -> None:
    answer = {
        "summary": "Fine.",
        "comments": [
            {"path": "src/widget.py", "line": 4, "severity": "nit", "body": "Trailing comma."},
            {"path": "src/widget.py", "line": 6, "severity": "warning", "body": "f3 ignores errors."},
        ],
    }
    async with harness(tmp_path) as h:
        h.github.set_file(REPO, ".github/reviewer.yml", "nits: fold\n")
        h.anthropic.script_tool_answer(answer)
        pull, job_id = await h.open_pr()
        job = await h.wait_state(job_id, JobState.SUCCEEDED)
        assert 'report minor points with severity "nit"' in user_text(h.anthropic.message_requests[0])
        assert [c["line"] for c in h.github.review_comments_for(REPO, 1)] == [6]  # a nit never goes inline
        [review] = h.reviews()
        folded = review["body"].split("<details>\n<summary>1 nit, folded</summary>", 1)[1].split("</details>")[0]
        assert "Trailing comma." in folded
        assert job.details.counts.nit == 1
    (tmp_path / "off").mkdir()
    async with harness(tmp_path / "off") as h:
        h.anthropic.script_tool_answer(answer)
        pull, job_id = await h.open_pr()
        job = await h.wait_state(job_id, JobState.SUCCEEDED)
        assert "nit" not in user_text(h.anthropic.message_requests[0]).split("<pr_data>")[0]
        [review] = h.reviews()
        assert "Trailing comma." not in review["body"] and "nit" not in review["body"]
        assert job.details.counts.nit == 0


async def test_the_check_run_concludes_by_the_repositorys_rule(tmp_path) -> None:
    critical = {
        "summary": "Risky.",
        "comments": [{"path": "src/widget.py", "line": 4, "severity": "critical", "body": "Data loss."}],
    }
    warning = {
        "summary": "Mostly fine.",
        "comments": [{"path": "src/widget.py", "line": 4, "severity": "warning", "body": "Fragile."}],
    }
    for name, config, answer, conclusion in [
        ("default-critical", None, critical, "neutral"),
        ("default-warning", None, warning, "success"),
        ("strict", "conclusions:\n  critical: failure\n  warning: neutral\n", critical, "failure"),
        ("strict-warning", "conclusions:\n  critical: failure\n  warning: neutral\n", warning, "neutral"),
    ]:
        (tmp_path / name).mkdir()
        async with harness(tmp_path / name) as h:
            if config:
                h.github.set_file(REPO, ".github/reviewer.yml", config)
            h.anthropic.script_tool_answer(answer)
            pull, job_id = await h.open_pr()
            await h.wait_check_synced(job_id)
            [run] = h.check_runs(pull.head_sha)
            assert run["conclusion"] == conclusion, name


async def test_a_review_made_in_parts_has_one_summary(tmp_path) -> None:
    big = [
        added_file(f"src/mod{i}.py", [f"x{i}_{j} = {j}  # padding to make the lines longer" for j in range(100)])
        for i in range(3)
    ]
    async with harness(tmp_path, REVIEWER_MAX_INPUT_TOKENS="5500", REVIEWER_MAX_PARTS="3") as h:
        for i in range(3):
            h.anthropic.script_tool_answer({"summary": f"Risk {i}: check the padding of mod{i}.", "comments": []})
        pull, job_id = await h.open_pr(files=big)
        await h.wait_state(job_id, JobState.SUCCEEDED)
        requests = h.anthropic.message_requests
        assert len(requests) == 3
        assert all("Your summary is joined with theirs into one" in user_text(r) for r in requests)
        [review] = h.reviews()
        first = review["body"].split("\n\n", 1)[0]
        assert (
            first == "Risk 0: check the padding of mod0. Risk 1: check the padding of mod1. "
            "Risk 2: check the padding of mod2."
        )
        assert "Part" not in review["body"]


async def test_files_not_reviewed_are_counted_folded_and_grouped_and_absent_when_there_are_none(tmp_path) -> None:
    deleted = [pull_file(f"old/gone{i}.py", "@@ -1 +0,0 @@\n-x = 1", status="removed") for i in range(3)]
    lock = pull_file("package-lock.json", '@@ -1,2 +1,2 @@\n {\n-  "v": 1\n+  "v": 2')
    async with harness(tmp_path) as h:
        pull, job_id = await h.open_pr(files=[SOURCE, *deleted, lock])
        await h.wait_state(job_id, JobState.SUCCEEDED)
        pull2, job2 = await h.open_pr(number=2)
        await h.wait_state(job2, JobState.SUCCEEDED)
        [review] = h.reviews()
        section = review["body"].split("<details>\n<summary>Not reviewed: 4 files (3 deleted, 1 lock file)</summary>")
        assert len(section) == 2
        inside = section[1].split("</details>")[0]
        assert "**deleted** (3)\n\n- `old/gone0.py`\n- `old/gone1.py`\n- `old/gone2.py`" in inside
        assert "**lock file** (1)\n\n- `package-lock.json`" in inside
        [clean] = h.reviews(2)
        assert "not reviewed" not in clean["body"].lower() and "<details>" not in clean["body"]


async def test_removed_lines_get_comments_on_the_left_and_off_diff_ones_a_permalink(tmp_path) -> None:
    old = [f"line {i}" for i in range(1, 11)]
    new = [*old[:3], "line four, checked elsewhere", *old[4:]]  # line 4 replaced
    changed = pull_file("src/app.py", patch_between(old, new))
    async with harness(tmp_path) as h:
        h.anthropic.script_tool_answer(
            {
                "summary": "Check the removal.",
                "comments": [
                    {
                        "path": "src/app.py",
                        "line": 4,
                        "side": "LEFT",
                        "severity": "critical",
                        "body": "This check is gone.",
                    },
                    {"path": "src/app.py", "line": 631, "severity": "warning", "body": "The caller still expects it."},
                ],
            }
        )
        pull, job_id = await h.open_pr(files=[changed])
        await h.wait_state(job_id, JobState.SUCCEEDED)
        [comment] = h.github.review_comments_for(REPO, 1)  # the fake refuses what GitHub refuses
        assert (comment["path"], comment["line"], comment["side"]) == ("src/app.py", 4, "LEFT")
        [review] = h.reviews()
        permalink = f"https://github.com/{REPO}/blob/{pull.head_sha}/src/app.py#L631"
        assert (
            f"**🟠 Warning · [`src/app.py`, line 631]({permalink})**\n\nThe caller still expects it." in review["body"]
        )
        assert f"[`src/app.py` line 4 (old)]({diff_anchor('src/app.py', 4, 'L')})" in review["body"]


async def test_the_check_run_shows_summary_top_findings_the_reviews_link_and_counts_every_finding(tmp_path) -> None:
    lock = pull_file("package-lock.json", '@@ -1,2 +1,2 @@\n {\n-  "v": 1\n+  "v": 2')
    async with harness(tmp_path) as h:
        h.anthropic.script_tool_answer(
            {
                "summary": "The retry loop can spin forever.",
                "comments": [
                    {"path": "src/widget.py", "line": 2, "severity": "warning", "body": "No timeout."},
                    {"path": "src/widget.py", "line": 4, "severity": "critical", "body": "Infinite loop."},
                    {"path": "src/widget.py", "line": 6, "severity": "suggestion", "body": "Extract a helper."},
                    {"path": "src/widget.py", "line": 400, "severity": "warning", "body": "Caller breaks."},
                ],
            }
        )
        pull, job_id = await h.open_pr(files=[SOURCE, lock])
        await h.wait_check_synced(job_id)
        [review] = h.reviews()
        [run] = h.check_runs(pull.head_sha)
        out = run["output"]
        assert out["title"] == "Reviewed 1 file: 4 findings (1 critical, 2 warnings, 1 suggestion)"
        assert f"[Open the review]({review['html_url']})" in out["summary"]
        assert "The retry loop can spin forever." in out["summary"]
        top = out["summary"].split("### Top findings\n\n", 1)[1].split("\n\n")[0].splitlines()
        assert top[0].startswith("- 🔴 Critical · [`src/widget.py` line 4]") and top[0].endswith("Infinite loop.")
        assert len(top) == 3 and "Caller breaks." in top[2]  # the suggestion is folded in the review
        assert "Not reviewed: 1 file (1 lock file)" in out["summary"]
        assert pull.head_sha not in out["summary"].split("\n\n")[0]  # a short sha, not a wall of hex


def apply_suggestions(content: str, comments: list[dict[str, Any]]) -> dict[int, str]:
    """Each posted suggestion applied on its own to ``content``, as GitHub's "Commit suggestion" does: by line."""
    results: dict[int, str] = {}
    for comment in comments:
        found = re.search(r"^(`{3,})suggestion\n(.*?)^\1$", comment["body"], re.MULTILINE | re.DOTALL)
        if not found:
            continue
        lines = content.split("\n")
        start = comment.get("start_line") or comment["line"]
        replacement = found.group(2).removesuffix("\n")
        lines[start - 1 : comment["line"]] = replacement.split("\n") if found.group(2) else []
        results[comment["line"]] = "\n".join(lines)
    return results


async def test_committable_suggestions_apply_to_the_head_file_exactly_and_the_rest_stay_as_text(tmp_path) -> None:
    old = [f"value_{i} = {i}" for i in range(1, 31)]
    new = list(old)
    new[4] = "value_5 = 'five'"  # hunk 1 around line 5
    new[5] = "value_6 = 'six'"
    new[19] = "value_20 = 'twenty'"  # hunk 2 around line 20
    content = "\n".join(new) + "\n"
    changed = pull_file("src/values.py", patch_between(old, new))
    fixes = {
        5: (None, "value_5 = 5  # the number, not a word"),
        7: (5, "value_5 = 5\nvalue_6 = 6\n```\nvalue_7 = 7"),  # multi-line, with a fence inside
        20: (None, "value_20 = 'twenty'"),  # the same text: nothing to commit
        21: (6, "crosses = 'two hunks'"),  # not one hunk
        19: (None, "value_19 = 'nineteen'\n"),  # a trailing newline is a line end, not an extra line
    }
    comments = [
        {
            "path": "src/values.py",
            "line": line,
            "severity": "warning",
            "body": f"Fix {line}.",
            "suggestion": text,
            **({"start_line": start} if start else {}),
        }
        for line, (start, text) in fixes.items()
    ]
    comments.append(
        {"path": "src/values.py", "line": 300, "severity": "warning", "body": "Off the diff.", "suggestion": "x = 1"}
    )
    async with harness(tmp_path) as h:
        h.github.set_file(REPO, ".github/reviewer.yml", "max_comments: 10\n")
        h.anthropic.script_tool_answer({"summary": "Types are mixed.", "comments": comments})
        pull, job_id = await h.open_pr(files=[changed])
        await h.wait_state(job_id, JobState.SUCCEEDED)
        posted = h.github.review_comments_for(REPO, 1)
        applied = apply_suggestions(content, posted)
        assert set(applied) == {5, 7, 19}
        for line, result in applied.items():
            start, text = fixes[line]
            lines = content.split("\n")
            lines[(start or line) - 1 : line] = text.removesuffix("\n").split("\n")
            assert result == "\n".join(lines), line
        by_line = {c["line"]: c for c in posted}
        assert (by_line[7]["start_line"], by_line[7]["start_side"], by_line[7]["side"]) == (5, "RIGHT", "RIGHT")
        assert "start_line" not in [k for k, v in by_line[5].items() if v is not None]
        for line in (20, 21):  # failed validation: kept as text, never dropped, never a suggestion block
            assert "```suggestion" not in by_line[line]["body"]
            assert "Suggested replacement:" in by_line[line]["body"]
            assert fixes[line][1] in by_line[line]["body"]
        [review] = h.reviews()
        assert "Off the diff.\n\nSuggested replacement:\n\n```\nx = 1\n```" in review["body"]


def render(markdown: str) -> str:
    """GitHub's flavour of Markdown as cmark-gfm renders it, raw HTML passed through (GitHub sanitises after)."""
    return cmarkgfm.github_flavored_markdown_to_html(markdown, options=Options.CMARK_OPT_UNSAFE)


def visible_text(rendered: str) -> str:
    return html.unescape(re.sub(r"<!--.*?-->|<[^>]+>", "", rendered, flags=re.DOTALL))


async def test_markdown_survives_githubs_rendering(tmp_path) -> None:
    forged = make_marker(99, "b" * 40)
    text = (
        "Returns `Optional<Path>` but the caller wants Optional<Path>, ping @alice.\n"
        "<details>\n<summary>Why it matters</summary>\n\n"
        "H<sub>2</sub>O and x<sup>2</sup>, a line<br>break, <code>raw()</code>.\n"
        f"</details>\n</details> {forged} <img src=x onerror=alert(1)>\n"
        "```python\nx: Optional[Path] = None  # @bob in code\n```"
    )
    async with harness(tmp_path) as h:
        h.anthropic.script_tool_answer(
            {
                "summary": f"Summary with <details> left open @carol {forged}",
                "comments": [
                    {"path": "src/widget.py", "line": 4, "severity": "warning", "body": text},
                    {"path": "src/widget.py", "line": 400, "severity": "warning", "body": text},
                ],
            }
        )
        pull, job_id = await h.open_pr()
        await h.wait_state(job_id, JobState.SUCCEEDED)
        [review] = h.reviews()
        [comment] = h.github.review_comments_for(REPO, 1)
        assert parse_markers(review["body"]) == parse_markers(make_marker(job_id, pull.head_sha))
        for markdown in (review["body"], comment["body"]):
            rendered = render(markdown)
            seen = visible_text(rendered)
            assert "reviewer-app:review" not in seen  # our marker stays hidden; the forged one is gone
            assert re.search(r"(?<![\w\u200b])@(alice|carol)\b", seen) is None  # no live mention
            assert "<details>" in rendered and "<summary>Why it matters</summary>" in rendered
            for tag in ("<sub>2</sub>", "<sup>2</sup>", "<br>", "<code>raw()</code>"):
                assert tag in rendered, tag
            assert "<code>Optional&lt;Path&gt;</code>" in rendered  # inline code intact
            assert "caller wants Optional&lt;Path&gt;" in rendered  # shown, not swallowed as a tag
            assert "<img" not in rendered and "&lt;img" in rendered
            assert "&lt;details" not in rendered.split("Summary with", 1)[0]  # no literal tag that should render
            assert rendered.count("<details>") == rendered.count("</details>")
        # The review's own sections are not swallowed by a fold left open in the model's text.
        assert "<sub>1 file reviewed" in render(review["body"]).rsplit("</details>", 1)[1]
