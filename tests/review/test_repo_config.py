"""Per-repository configuration: parsed within the operator's limits, read from the base branch."""

from __future__ import annotations

from dataclasses import replace

from reviewer_app.core.cancel_reasons import COVERED_PREFIX, CancelReason
from reviewer_app.core.experiments import Experiment, assign
from reviewer_app.core.states import JobState
from reviewer_app.github.check_run_text import desired_check
from reviewer_app.review.repo_config import CONFIG_PATH, RepoConfig, parse_repo_config, with_variant
from tests.fakes.github import added_file
from tests.harness import REPO, SOURCE, harness
from tests.helpers import eventually
from tests.prompt_text import changed_files, files_shown, user_text


def parse(text: str | None):
    return parse_repo_config(text, max_input_tokens=50000, max_parts=3)


def test_no_file_means_defaults() -> None:
    cfg = parse(None)
    assert cfg.auto and cfg.ignore == () and cfg.errors == ()


def test_a_valid_file() -> None:
    cfg = parse(
        "auto: false\nignore: ['docs/**', '*.snap']\ninstructions: Focus on security.\nlanguage: German\n"
        "max_input_tokens: 20000\nmax_parts: 2\n"
    )
    assert (cfg.auto, cfg.ignore, cfg.instructions, cfg.language, cfg.max_input_tokens, cfg.max_parts) == (
        False,
        ("docs/**", "*.snap"),
        "Focus on security.",
        "German",
        20000,
        2,
    )
    assert cfg.errors == ()


def test_drafts_is_off_unless_the_file_turns_it_on() -> None:
    assert parse(None).drafts is False and parse("auto: true\n").drafts is False
    assert parse("drafts: true\n").drafts is True
    cfg = parse("drafts: sometimes\n")
    assert cfg.drafts is False and cfg.errors == ("drafts must be true or false",)


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
        [req] = h.anthropic.message_requests
        shown = files_shown(req)
        assert "generated_api/client.py" not in shown and "src/widget.py" in shown and "Be terse." in user_text(req)
        assert "generated_api/client.py (added, +1 -0): not reviewed: ignored by configuration" in changed_files(req)
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


async def test_a_draft_waits_for_ready_for_review_by_default(tmp_path) -> None:
    async with harness(tmp_path) as h:
        pull, draft_job = await h.open_pr(draft=True)
        job = await h.wait_state(draft_job, JobState.CANCELLED)
        assert job.trigger == "draft" and "draft pull request" in job.outcome
        assert h.reviews() == [] and h.anthropic.message_requests == []
        # No "waiting" check on a draft, but once skipped, the head says why it has no review.
        await h.wait_check_synced(draft_job)
        [skipped] = h.check_runs(pull.head_sha)
        assert (skipped["status"], skipped["conclusion"]) == ("completed", "skipped")
        assert "draft pull request" in skipped["output"]["summary"]

        pull.draft = False
        ready = await h.deliver("pull_request", h.pr_payload(pull, "ready_for_review"))
        assert ready["outcome"] == "enqueued" and ready["job_id"] != draft_job
        await h.wait_state(ready["job_id"], JobState.SUCCEEDED)
        await h.wait_check_synced(ready["job_id"])
        runs = h.check_runs(pull.head_sha)
        assert len(h.reviews()) == 1 and [r["conclusion"] for r in runs] == ["skipped", "success"]


async def test_drafts_true_reviews_drafts_and_ready_for_review_does_not_review_the_same_head_again(tmp_path) -> None:
    async with harness(tmp_path) as h:
        h.github.set_file(REPO, CONFIG_PATH, "drafts: true\n")
        pull, draft_job = await h.open_pr(draft=True)
        await h.wait_state(draft_job, JobState.SUCCEEDED)
        assert len(h.reviews()) == 1 and len(h.anthropic.message_requests) == 1
        await h.wait_check_synced(draft_job)
        assert len(h.check_runs(pull.head_sha)) == 1

        pull.draft = False
        ready = await h.deliver("pull_request", h.pr_payload(pull, "ready_for_review"))
        job = await h.wait_state(ready["job_id"], JobState.CANCELLED)
        assert "already reviewed" in job.outcome
        assert len(h.reviews()) == 1 and len(h.anthropic.message_requests) == 1

        # A new push to the ready pull request is reviewed as usual.
        h.github.advance_head(REPO, 1)
        pushed = await h.deliver("pull_request", h.pr_payload(pull, "synchronize"))
        await h.wait_state(pushed["job_id"], JobState.SUCCEEDED)
        assert len(h.reviews()) == 2


async def test_a_draft_job_of_a_pull_request_marked_ready_since_is_skipped(tmp_path) -> None:
    async with harness(tmp_path) as h:
        h.github.set_file(REPO, CONFIG_PATH, "drafts: true\n")
        pull = h.github.add_pull(REPO, 1, files=[SOURCE])  # ready by the time the worker looks
        payload = h.pr_payload(pull)
        payload["pull_request"]["draft"] = True  # the webhook was sent while it was a draft
        answer = await h.deliver("pull_request", payload)
        job = await h.wait_state(answer["job_id"], JobState.CANCELLED)
        assert job.trigger == "draft" and "no longer a draft" in job.outcome
        assert h.reviews() == [] and h.anthropic.message_requests == []


async def test_a_pull_request_turned_draft_before_its_automatic_review_ran_waits(tmp_path) -> None:
    async with harness(tmp_path) as h:
        pull = h.github.add_pull(REPO, 1, files=[SOURCE], draft=True)  # converted to draft after the push
        payload = h.pr_payload(pull)
        payload["pull_request"]["draft"] = False
        answer = await h.deliver("pull_request", payload)
        job = await h.wait_state(answer["job_id"], JobState.CANCELLED)
        assert job.trigger == "auto" and "draft pull request" in job.outcome
        # `/review` is never skipped for being a draft.
        manual = await h.deliver("issue_comment", h.comment_payload(pull, "/review"))
        await h.wait_state(manual["job_id"], JobState.SUCCEEDED)
        assert len(h.reviews()) == 1


async def test_a_waiting_draft_job_shows_no_queued_check_run(tmp_path) -> None:
    # Every push to a draft gets a job, but most repositories do not review drafts: only a review that starts
    # opens a check run on a draft, never a "waiting for a review slot" one.
    async with harness(tmp_path, REVIEWER_DEBOUNCE_SECONDS="60") as h:
        draft = h.github.add_pull(REPO, 1, files=[SOURCE], draft=True)
        ready = h.github.add_pull(REPO, 2, files=[SOURCE])
        d = await h.deliver("pull_request", h.pr_payload(draft, "synchronize"))
        r = await h.deliver("pull_request", h.pr_payload(ready, "synchronize"))

        async def synced() -> bool:
            jobs = [await h.job(d["job_id"]), await h.job(r["job_id"])]
            return all(j.check_run_status == "queued:0" for j in jobs)

        await eventually(synced, timeout=10)
        assert [run["status"] for run in h.check_runs(ready.head_sha)] == ["queued"]
        assert h.check_runs(draft.head_sha) == []
        assert (await h.job(d["job_id"])).state == JobState.QUEUED


async def test_the_check_run_of_a_head_already_reviewed_says_success(tmp_path) -> None:
    async with harness(tmp_path) as h:
        _, job_id = await h.open_pr()
        job = await h.wait_state(job_id, JobState.SUCCEEDED)
    covered = replace(
        job,
        state=JobState.CANCELLED,
        outcome=f"{COVERED_PREFIX}commit {job.head_sha} was reviewed",
        cancel_reason=CancelReason.COVERED,
    )
    view = desired_check(covered)
    assert (view.status, view.conclusion, view.title) == ("completed", "success", "Already reviewed")
    assert view.summary == f"No new review: commit {job.head_sha} was reviewed."
    skipped = desired_check(replace(covered, outcome="skipped: draft pull request", cancel_reason=CancelReason.SKIPPED))
    assert skipped.conclusion == "skipped"


async def test_marked_ready_while_the_drafts_review_of_that_head_runs_one_review_results(tmp_path) -> None:
    async with harness(tmp_path) as h:
        h.github.set_file(REPO, CONFIG_PATH, "drafts: true\n")
        h.anthropic.script_slow_answer(1.0)
        pull, draft_job = await h.open_pr(draft=True)

        async def asked() -> bool:
            return bool(h.anthropic.message_requests)

        await eventually(asked, timeout=10)  # the draft's review is with the model
        pull.draft = False
        ready = await h.deliver("pull_request", h.pr_payload(pull, "ready_for_review"))
        assert not ready.get("superseded")  # the draft's job is running, not waiting: it is not superseded
        await h.wait_state(draft_job, JobState.SUCCEEDED)
        job = await h.wait_state(ready["job_id"], JobState.CANCELLED)
        assert "already reviewed" in job.outcome
        assert len(h.reviews()) == 1 and len(h.anthropic.message_requests) == 1


def test_nits_and_conclusions() -> None:
    cfg = parse("nits: fold\nconclusions:\n  critical: failure\n  warning: neutral\n")
    assert (cfg.nits, cfg.conclusions, cfg.errors) == ("fold", {"critical": "failure", "warning": "neutral"}, ())
    default = parse("auto: true\n")
    assert (default.nits, default.conclusions) == ("off", {"critical": "neutral"})
    bad = parse("nits: yes\nconclusions:\n  critical: block\n")
    assert (bad.nits, bad.conclusions) == ("off", {"critical": "neutral"})
    assert bad.errors == (
        "nits must be fold or off",
        "conclusions must map critical, warning, suggestion or nit to success, neutral or failure",
    )


def test_verification_threshold_and_cap_are_read_within_their_bounds() -> None:
    cfg = parse(None)
    assert (cfg.verify, cfg.min_confidence, cfg.max_comments) == (None, 50, 5)
    cfg = parse("verify: false\nmin_confidence: 75\nmax_comments: 12\n")
    assert (cfg.verify, cfg.min_confidence, cfg.max_comments, cfg.errors) == (False, 75, 12, ())
    cfg = parse("verify: sometimes\nmin_confidence: 101\nmax_comments: 0\n")
    assert (cfg.verify, cfg.min_confidence, cfg.max_comments) == (None, 50, 5)
    assert cfg.errors == (
        "verify must be true or false",
        "min_confidence must be a whole number from 0 to 100",
        "max_comments must be a whole number from 1 to 50",
    )


def test_an_experiment_block_is_read_and_each_pull_request_gets_its_variant() -> None:
    text = "min_confidence: 40\nexperiment:\n  name: conf-65\n  a: {min_confidence: 50}\n  b: {min_confidence: 65, verify: false}\n"
    cfg = parse_repo_config(text, max_input_tokens=60000, max_parts=3)
    assert cfg.errors == () and cfg.experiment is not None and cfg.variant is None
    for pr in range(1, 20):
        applied = with_variant(cfg, cfg.experiment, 7, pr, max_input_tokens=60000, max_parts=3)
        variant = assign("conf-65", 7, pr)
        assert applied.variant == variant
        assert (applied.min_confidence, applied.verify) == ((50, None) if variant == "a" else (65, False))
    assert with_variant(cfg, None, 7, 1, max_input_tokens=60000, max_parts=3) == cfg


def test_an_experiment_with_a_wrong_setting_is_not_run_and_says_why() -> None:
    text = "experiment:\n  name: conf\n  a: {min_confidence: 500}\n  b: {min_confidence: 65}\n"
    cfg = parse_repo_config(text, max_input_tokens=60000, max_parts=3)
    assert cfg.experiment is None
    assert "experiment variant a: min_confidence must be a whole number from 0 to 100" in cfg.errors
    assert cfg.errors[-1] == "the experiment is not run"
    over = parse_repo_config(
        "experiment:\n  name: big\n  a: {max_parts: 9}\n  b: {}\n", max_input_tokens=60000, max_parts=3
    )
    assert over.experiment is None and any("above the operator's limit" in e for e in over.errors)


def test_the_operators_experiment_is_checked_against_the_operators_limits() -> None:
    experiment = Experiment("parts", {"max_parts": 9}, {"max_parts": 9, "nits": "fold"})
    applied = with_variant(RepoConfig(), experiment, 7, 1, max_input_tokens=60000, max_parts=3)
    assert applied.variant is None and applied.max_parts is None
    assert any("experiment parts variant" in e and "not applied" in e for e in applied.errors)


def test_passes_default_to_one_and_are_bounded() -> None:
    assert parse(None).passes == 1
    assert (parse("passes: 3\n").passes, parse("passes: 3\n").errors) == (3, ())
    for bad in ("passes: 0\n", "passes: 6\n", "passes: two\n", "passes: true\n"):
        cfg = parse(bad)
        assert (cfg.passes, cfg.errors) == (1, ("passes must be a whole number from 1 to 5",))


def test_the_vote_between_passes_is_off_unless_turned_on() -> None:
    assert parse(None).passes_vote is False
    assert (parse("passes: 3\npasses_vote: true\n").passes_vote, parse("passes_vote: true\n").errors) == (True, ())
    cfg = parse("passes_vote: majority\n")
    assert (cfg.passes_vote, cfg.errors) == (False, ("passes_vote must be true or false",))
