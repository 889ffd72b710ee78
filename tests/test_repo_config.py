"""Per-repository configuration: parsed within the operator's limits, read from the base branch."""

from __future__ import annotations

import json

from reviewer_app.core.states import JobState
from reviewer_app.review.repo_config import CONFIG_PATH, parse_repo_config
from tests.fakes.github import added_file
from tests.harness import REPO, SOURCE, harness


def parse(text: str | None):
    return parse_repo_config(text, max_input_tokens=50000, max_parts=3)


def test_no_file_means_defaults() -> None:
    cfg = parse(None)
    assert cfg.auto and cfg.ignore == () and cfg.errors == ()


def test_a_valid_file() -> None:
    cfg = parse("auto: false\nignore: ['docs/**', '*.snap']\ninstructions: Focus on security.\nlanguage: German\n"
                "max_input_tokens: 20000\nmax_parts: 2\n")  # fmt: skip
    assert (cfg.auto, cfg.ignore, cfg.instructions, cfg.language, cfg.max_input_tokens, cfg.max_parts) == (
        False, ("docs/**", "*.snap"), "Focus on security.", "German", 20000, 2)
    assert cfg.errors == ()


def test_limits_above_the_operators_are_capped() -> None:
    cfg = parse("max_input_tokens: 999999\nmax_parts: 50\n")
    assert cfg.max_input_tokens == 50000 and cfg.max_parts == 3 and len(cfg.errors) == 2


def test_invalid_values_are_reported_and_defaults_apply() -> None:
    cfg = parse("auto: maybe\nignore: 5\nlanguage: ''\nmax_parts: -1\nfrobnicate: 1\n")
    assert cfg.auto is True and cfg.ignore == () and cfg.language is None and cfg.max_parts is None
    assert len(cfg.errors) == 5 and any("frobnicate" in e for e in cfg.errors)


def test_broken_yaml_is_reported() -> None:
    cfg = parse("auto: [unclosed\n")
    assert cfg.auto is True and "not valid YAML" in cfg.errors[0]


def test_long_instructions_are_cut() -> None:
    cfg = parse("instructions: " + "x" * 5000)
    assert len(cfg.instructions) == 2000 and cfg.errors


async def test_auto_off_gets_no_automatic_review_but_review_still_works(tmp_path) -> None:
    async with harness(tmp_path) as h:
        h.github.set_file(REPO, CONFIG_PATH, "auto: false\n")
        pull, job_id = await h.open_pr()
        job = await h.wait_state(job_id, JobState.CANCELLED)
        assert "turned off" in job.outcome and h.reviews() == [] and h.anthropic.message_requests == []
        manual = await h.deliver("issue_comment", h.comment_payload(pull, "/review"))
        await h.wait_state(manual["job_id"], JobState.SUCCEEDED)
        assert len(h.reviews()) == 1


async def test_ignored_paths_are_not_sent_to_the_model(tmp_path) -> None:
    async with harness(tmp_path) as h:
        h.github.set_file(REPO, CONFIG_PATH, "ignore:\n  - 'generated_api/**'\ninstructions: Be terse.\n")
        gen = added_file("generated_api/client.py", ["x = 1"])
        pull, job_id = await h.open_pr(files=[SOURCE, gen])
        await h.wait_state(job_id, JobState.SUCCEEDED)
        sent = json.dumps(h.anthropic.message_requests[0].messages)
        assert "generated_api/client.py" not in sent and "src/widget.py" in sent and "Be terse." in sent
        assert "generated_api/client.py" in h.reviews()[0]["body"]


async def test_an_invalid_file_shows_in_the_check_run_and_defaults_apply(tmp_path) -> None:
    async with harness(tmp_path) as h:
        h.github.set_file(REPO, CONFIG_PATH, "auto: sometimes\n")
        pull, job_id = await h.open_pr()
        await h.wait_state(job_id, JobState.SUCCEEDED)
        await h.wait_check_synced(job_id)
        [run] = h.check_runs(pull.head_sha)
        assert "reviewer.yml" in run["output"]["summary"] and "auto must be true or false" in run["output"]["summary"]


async def test_the_file_is_read_at_the_base_branch_not_the_head(tmp_path) -> None:
    async with harness(tmp_path) as h:
        pull = h.github.add_pull(REPO, 1, files=[SOURCE])
        # The PR's own branch tries to switch reviews off; only the base branch's file counts.
        h.github.set_file(REPO, CONFIG_PATH, "auto: false\n", ref=pull.head_ref)
        h.github.set_file(REPO, CONFIG_PATH, "auto: false\n", ref=pull.head_sha)
        answer = await h.deliver("pull_request", h.pr_payload(pull))
        await h.wait_state(answer["job_id"], JobState.SUCCEEDED)
        assert len(h.reviews()) == 1
        reads = h.github.requests_matching("GET", r"/contents/")
        assert reads and all(r.query.get("ref") == "main" for r in reads)
