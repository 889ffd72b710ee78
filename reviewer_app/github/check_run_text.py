"""What a job's check run shows: its phase, title, summary and conclusion, from the job as stored (pure)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from reviewer_app.core.batching import WAITING_PREFIX
from reviewer_app.core.cancel_reasons import CancelReason, explanation
from reviewer_app.core.job_records import CheckReport
from reviewer_app.core.markers import safe_for_github
from reviewer_app.core.review_model import ReviewCounts, plural
from reviewer_app.core.states import JobState
from reviewer_app.store.base import Job

MAX_REASON_CHARS = 1_000
MAX_CHECK_SUMMARY_CHARS = 3_000  # the review's summary as the check run repeats it
MAX_FOLD_CHARS = 6_000  # a folded section of the check run (the findings held back)
# Check-run conclusions a repository may map a severity to, least severe first.
CONCLUSIONS: tuple[str, ...] = ("success", "neutral", "failure")
DEFAULT_CONCLUSIONS: Mapping[str, str] = {"critical": "neutral"}
_FULL_SHA = re.compile(r"\b[0-9a-f]{40}\b")
_SHORT_OR_FULL_SHA = re.compile(r"[0-9a-fA-F]{7,64}")


@dataclass(frozen=True)
class CheckView:
    """What a check run should show for a job; ``key`` is stored once GitHub shows it."""

    key: str
    status: str
    title: str
    summary: str
    conclusion: str | None = None
    folds: tuple[tuple[str, str], ...] = ()  # (title, text) of folded sections after the summary

    def output(self) -> dict[str, str]:
        # The summary is Markdown and may quote an error, a login or .github/reviewer.yml: neutralised as a whole
        # (our own text has nothing safe_for_github changes), so no part of it can ping or hide anything. A folded
        # section's title and text are neutralised apart, inside our own <details> (safe_for_github escapes a
        # line-leading "<" and closes an open fence, so nothing in them can close the fold early).
        summary = safe_for_github(self.summary, 60000 - MAX_FOLD_CHARS * len(self.folds))
        for title, text in self.folds:
            summary += (
                f"\n\n<details>\n<summary>{safe_for_github(' '.join(title.split()), 200)}</summary>\n\n"
                f"{safe_for_github(text, MAX_FOLD_CHARS - 300)}\n\n</details>"
            )
        return {"title": self.title[:255], "summary": summary}


def check_key(job: Job) -> str:
    if job.state == JobState.QUEUED:
        return f"queued:{job.attempts}"
    if job.state == JobState.RUNNING:
        return f"in_progress:{job.attempts}"
    return "completed"


def desired_check(job: Job, *, newer_sha: str | None = None) -> CheckView:
    """The check run a job's state calls for (pure). A published review concludes as its repository's rule says
    (`conclusions` in .github/reviewer.yml: by default ``neutral`` with a critical finding, ``success`` otherwise;
    ``failure`` only where a repository asks for it). Otherwise only ``success``, ``neutral``, ``skipped`` and
    ``cancelled`` are used, and a failed review is ``neutral``."""
    key = check_key(job)
    if job.state == JobState.QUEUED:
        if (job.last_error or "").startswith(WAITING_PREFIX):  # [batches] deferred while its batch runs
            return CheckView(
                key,
                "queued",
                "Waiting for a batch review",
                "The review was sent through Anthropic's Message Batches (half price) and is posted when the batch "
                "ends, within 24 hours.",
            )
        if job.attempts == 0:
            return CheckView(
                key,
                "queued",
                "Waiting for a review slot",
                "The review is queued and starts as soon as a worker slot is free.",
            )
        return CheckView(
            key,
            "queued",
            f"Retrying after attempt {job.attempts}",
            f"Attempt {job.attempts} did not finish: {job.last_error or 'unknown error'}. It will be tried again.",
        )
    if job.state == JobState.RUNNING:
        return CheckView(key, "in_progress", "Reviewing", f"Claude is reviewing commit {job.head_sha}.")
    if job.state == JobState.SUCCEEDED and job.details.would_publish is not None:
        title, summary = check_dry_run(job.head_sha, job.details.would_publish.why)
        return CheckView(key, "completed", title, summary, "neutral")
    if job.state == JobState.SUCCEEDED:
        details = job.details
        counts = details.counts or ReviewCounts(0, 0, 0, 0)
        report = details.report or CheckReport()
        title, summary = check_reviewed(counts, head_sha=job.head_sha, report=report)
        if details.config_errors:
            summary += "\n\n**Problems in .github/reviewer.yml** (defaults applied):\n" + "\n".join(
                f"- {p}" for p in details.config_errors
            )
        conclusion = report.conclusion
        folds = ((withheld_title(report.withheld_count), "\n".join(report.withheld)),) if report.withheld else ()
        return CheckView(
            key, "completed", title, summary, conclusion if conclusion in CONCLUSIONS else "success", folds
        )
    if job.state == JobState.SUPERSEDED:
        sha = newer_sha or _first_sha(job.outcome or "") or "a newer commit"
        title, summary = check_superseded(sha)
        return CheckView(key, "completed", title, summary, "skipped")
    if job.state == JobState.CANCELLED and job.cancel_reason == CancelReason.SKIPPED:
        reason = explanation(job.outcome, job.cancel_reason)
        return CheckView(key, "completed", "Review skipped", f"No review was run: {reason}.", "skipped")
    if job.state == JobState.CANCELLED and job.cancel_reason == CancelReason.COVERED:
        reason = explanation(job.outcome, job.cancel_reason)
        return CheckView(key, "completed", "Already reviewed", f"No new review: {reason}.", "success")
    if job.state == JobState.CANCELLED and job.cancel_reason == CancelReason.REFUSED:
        reason = explanation(job.outcome, job.cancel_reason)
        return CheckView(
            key,
            "completed",
            "Review skipped: budget limit reached",
            f"No review was run: the {reason}. The limits are set by the operator "
            "(REVIEWER_MAX_REVIEWS_PER_DAY, REVIEWER_MAX_MANUAL_PER_PR_HOUR).",
            "neutral",
        )
    if job.state == JobState.CANCELLED:
        title, summary = check_cancelled(job.outcome or "the review was cancelled")
        return CheckView(key, "completed", title, summary, "cancelled")
    title, summary = check_failed(
        job.attempts, job.last_error or "unknown error", retry_hint="A maintainer can re-run this check to try again."
    )
    return CheckView(key, "completed", title, summary, "neutral")


def _first_sha(text: str) -> str | None:
    m = _FULL_SHA.search(text)
    return m.group(0) if m else None


def conclusion_for(counts: ReviewCounts, rule: Mapping[str, str] = DEFAULT_CONCLUSIONS) -> str:
    """The check run's conclusion: the strongest one ``rule`` maps a present severity to (``success`` otherwise)."""
    present = [rule.get(s, "success") for s, n in counts.by_severity().items() if n]
    return max(present, key=CONCLUSIONS.index, default="success")


def check_reviewed(counts: ReviewCounts, *, head_sha: str, report: CheckReport | None = None) -> tuple[str, str]:
    """Title and summary of a completed check run after the review was published (or found published). ``report``
    (stored with the job when it published) adds the summary, the top findings, the review's link and what was not
    reviewed; the title counts every finding."""
    report = report or CheckReport()
    if counts.files_reviewed == 0:
        title = "No files to review"
    elif counts.findings:
        title = f"Reviewed {plural(counts.files_reviewed, 'file')}: {plural(counts.findings, 'finding')} ({counts.severities()})"
    else:
        title = f"Reviewed {plural(counts.files_reviewed, 'file')}: no findings"
    parts: list[str] = []
    if report.review_url:
        parts.append(f"**[Open the review]({report.review_url})** · commit `{head_sha[:12]}`")
    else:
        parts.append(f"Reviewed commit `{head_sha[:12]}`.")
    if report.summary:
        parts.append(report.summary)
    if report.top:
        more = counts.findings - counts.nit - len(report.top)
        parts.append(
            "### Top findings\n\n"
            + "\n".join(report.top)
            + (f"\n\n_…and {more} more in the review._" if more > 0 else "")
        )
    if counts.nit:
        parts.append(f"{plural(counts.nit, 'nit')} folded in the review.")
    if report.not_reviewed:
        parts.append(f"{report.not_reviewed}; the review lists them.")
    if report.answers > 0:
        parts.append(f"Answers in this pull request's threads so far: {report.answers}.")
    if report.resolved > 0:
        parts.append(f"{plural(report.resolved, 'earlier review thread')} resolved: the code they pointed at changed.")
    if report.passes:
        parts.append(f"Reviewed in {report.passes}.")
    parts.append(f"<sub>{counts.line()}</sub>")
    return title, "\n\n".join(parts)


def check_dry_run(head_sha: str, why: str) -> tuple[str, str]:
    """Title and summary of a dry run's check run: reviewed, nothing posted, and none of what was found (the findings
    are for the operator, on the dashboard and in `reviewer-app jobs show`, until the app is let speak)."""
    because = f" ({safe_for_github(why, MAX_REASON_CHARS)})" if why else ""
    return (
        "Dry run: review not posted",
        f"Commit `{head_sha[:12]}` was reviewed in dry-run mode{because}: nothing was posted on this pull request. "
        "The operator sees what would have been posted on the dashboard and in `reviewer-app jobs show`.",
    )


def withheld_title(count: int) -> str:
    """The title of the check run's folded section on the findings held back."""
    return f"{plural(count, 'finding')} held back: why"


def check_superseded(new_sha: str | None) -> tuple[str, str]:
    """Title and summary when a newer head made this review pointless; ``new_sha`` may be unknown (None)."""
    if new_sha is None or not _SHORT_OR_FULL_SHA.fullmatch(new_sha):
        return "Superseded by a newer commit", "A newer commit was pushed before this review finished."
    return (
        f"Superseded by {new_sha[:7]}",
        f"A newer commit, {new_sha}, was pushed before this review finished. That commit is reviewed instead.",
    )


def check_cancelled(reason: str = "the pull request was closed") -> tuple[str, str]:
    """Title and summary when the review was cancelled (PR closed, app uninstalled, operator)."""
    return "Review cancelled", f"No review was posted: {safe_for_github(reason.rstrip('. '), MAX_REASON_CHARS)}."


def check_failed(attempts: int, reason: str, *, retry_hint: str | None = None) -> tuple[str, str]:
    """Title and summary when the review gave up; ``reason`` must already be free of secrets."""
    summary = f"The review failed after {plural(attempts, 'attempt')}: {safe_for_github(reason, MAX_REASON_CHARS)}"
    if retry_hint:
        summary += f"\n\n{retry_hint}"
    return f"Review failed after {plural(attempts, 'attempt')}", summary
