"""The admin commands' answers as text for a terminal: status, the job list and one job."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from reviewer_app.core.queues import describe_loads
from reviewer_app.core.states import JobState


def _when(ts: float | None) -> str:
    if ts is None:
        return "-"
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def duration(seconds: float) -> str:
    seconds = max(0, int(seconds))
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d {hours}h"
    if hours:
        return f"{hours}h {minutes}m"
    if minutes:
        return f"{minutes}m {secs}s"
    return f"{secs}s"


def _ago(ts: float | None, now: float) -> str:
    if ts is None:
        return "-"
    return f"{duration(now - ts)} ago" if ts <= now else f"in {duration(ts - now)}"


def _one_line(text: str | None, width: int = 80) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _job_line(j: dict[str, Any]) -> str:
    return f"  job {j['id']}  {j['repo']}#{j['pr']}  {j['head_sha'][:10]}  attempt {j['attempts']}/{j['max_attempts']}"


def render_status(s: dict[str, Any]) -> str:
    now = s["now"]
    counts = ", ".join(f"{k} {v}" for k, v in s["jobs_by_state"].items())
    lines = [
        "queue:  PAUSED (no new claims; `reviewer-app queue resume` to resume)" if s["paused"] else "queue:  running",
        f"jobs:   {counts}",
        *([f"version: reviewer-app {s['version']}"] if "version" in s else []),
    ]
    oldest = s["oldest_pending"]
    if oldest is None:
        lines.append("oldest pending job: none pending")
    else:
        who = f" (job {oldest['job']['id']}, {oldest['job']['state']})" if oldest["job"] else ""
        lines.append(f"oldest pending job: {duration(oldest['age_seconds'])} old{who}")
    expired = s["expired_claims"]
    lines.append(f"expired claims: {expired['count'] or 'none'}")
    for j in expired["jobs"]:
        lines.append(f"{_job_line(j)}  held by {j['lease_owner']}, expired {_ago(j['lease_expires_at'], now)}")
    failed = s["exhausted_retries"]
    shown = f" (newest {len(failed['newest'])} shown)" if failed["count"] > len(failed["newest"]) else ""
    lines.append(f"exhausted retries (failed): {failed['count'] or 'none'}{shown}")
    for j in failed["newest"]:
        lines.append(f"{_job_line(j)}  {_ago(j['finished_at'], now)}: {_one_line(j['last_error'], 60)}")
    waiting = s["awaiting_reconciliation"]
    lines.append(f"publications awaiting reconciliation: {waiting['count'] or 'none'}")
    for j in waiting["jobs"]:
        lines.append(f"{_job_line(j)}  intent {_ago(j['publish_intent_at'], now)}, no review id yet")
    lines.append("queues (slots: of the processes alive now):")
    for q in s["queues"]:
        waiting = "" if q["queued"] is None else f"{q['queued']} queued, "
        lines.append(f"  {q['queue']:<13} {waiting}{q['running']} running, {q['slots']} slot(s)")
    workers = s["workers"]
    gone = sum(1 for w in workers if w["gone"])
    lines.append(f"processes: {len(workers) - gone} alive, {gone} gone" if workers else "processes: none registered")
    for w in workers:
        what = "GONE" if w["gone"] else "alive"
        lines.append(
            f"  {w['role']:<17} {w['host']} pid {w['pid']}  {what}, heartbeat {_ago(w['heartbeat_at'], now)}"
            f"  {w['jobs_running']}/{w['slots']} slot(s)  v{w['version']}  up since {_when(w['started_at'])}"
        )
        if w["queues"]:
            lines.append(f"    busy/slots: {describe_loads(w['queues'])}")
        for h in w["held_jobs"]:
            lines.append(f"    job {h['id']}  {h['repo']}#{h['pr']}  rescued {_ago(h['rescued_at'], now)}")
    return "\n".join(lines)


def render_list(jobs: list[dict[str, Any]], now: float) -> str:
    if not jobs:
        return "no jobs"
    rows = [("ID", "STATE", "PULL REQUEST", "HEAD", "ATT", "CREATED", "OUTCOME / LAST ERROR")]
    for j in jobs:
        rows.append(
            (
                str(j["id"]),
                j["state"],
                f"{j['repo']}#{j['pr']}",
                j["head_sha"][:10],
                f"{j['attempts']}/{j['max_attempts']}",
                _ago(j["created_at"], now),
                _one_line(j["outcome"] or j["last_error"], 60),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    return "\n".join(
        ("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)) + "  " + r[-1]).rstrip() for r in rows
    )


def _indented(text: str, prefix: str) -> list[str]:
    return [f"{prefix}{line}".rstrip() for line in text.splitlines()] or [prefix.rstrip()]


def held_back_lines(would: dict[str, Any] | None) -> list[str]:
    """What a dry run would have posted (review/dry_run.py), as it would have read on GitHub; nothing when it posted."""
    if not isinstance(would, dict):
        return []
    kind = "answer" if would.get("kind") == "answer" else "review"
    lines = [f"would have posted (dry run: {would.get('why') or 'dry run'}), the {kind}:"]
    lines += _indented(str(would.get("body") or ""), "    ")
    comments = would.get("comments") or []
    if comments:
        lines.append(f"  and {len(comments)} inline comment(s):")
    for c in comments:
        start = c.get("start_line")
        where = f"lines {start}-{c.get('line')}" if start else f"line {c.get('line')}"
        lines.append(f"  {c.get('path')} {where} ({c.get('side') or 'RIGHT'}):")
        lines += _indented(str(c.get("body") or ""), "    ")
    return lines


def render_job(j: dict[str, Any], now: float) -> str:
    links = j["links"]
    lease = "-"
    if j["state"] == JobState.RUNNING.value and j["lease_expires_at"] is not None:
        expires = j["lease_expires_at"]
        lease = f"held by {j['lease_owner']}, " + (
            f"expired {_ago(expires, now)}" if expires < now else f"expires {_ago(expires, now)}"
        )
    elif j["lease_owner"]:
        lease = f"last held by {j['lease_owner']}"
    fields = [
        ("pull request", f"{j['repo']}#{j['pr']}  {links['pull_request']}"),
        ("head", j["head_sha"]),
        ("trigger", f"{j['trigger']} (priority {j['priority']})"),
        ("delivery", j["delivery_id"] or "-"),
        ("attempts", f"{j['attempts']} of {j['max_attempts']}"),
        ("created", f"{_when(j['created_at'])} ({_ago(j['created_at'], now)})"),
        ("started", _when(j["started_at"])),
        ("finished", _when(j["finished_at"])),
        ("next attempt", _when(j["next_attempt_at"]) if j["state"] == JobState.QUEUED.value else "-"),
        ("lease", lease),
        ("outcome", j["outcome"] or "-"),
        ("last error", j["last_error"] or "-"),
        ("superseded by", f"job {j['superseded_by']}" if j["superseded_by"] else "-"),
        ("check run", f"{j['check_run_id']}  {links['check_run']}" if "check_run" in links else "-"),
        ("review", f"{j['review_id']}  {links['review']}" if "review" in links else "-"),
        ("publish intent", _when(j["publish_intent_at"])),
    ]
    lines = [f"job {j['id']}  {j['state']}"] + [f"  {k:<15}{v}" for k, v in fields]
    lines += held_back_lines(j.get("details", {}).get("would_publish"))
    lines.append("attempts:" if j["attempt_history"] else "attempts: none yet")
    for a in j["attempt_history"]:
        took = f" ({duration(a['finished_at'] - a['started_at'])})" if a["finished_at"] is not None else " (running)"
        lines.append(
            f"  #{a['attempt']}  {_when(a['started_at'])}{took}  {a['outcome'] or 'running'}  "
            f"lease holder {a['lease_owner']}"
        )
        if a["error"]:
            lines.append(f"      error: {_one_line(a['error'], 200)}")
        t = a["tokens"]
        if any(t.values()) or a["model"]:
            lines.append(
                f"      tokens: input {t['input']}, output {t['output']}, cache write {t['cache_creation']}, "
                f"cache read {t['cache_read']} ({a['model'] or 'model unknown'})"
            )
    return "\n".join(lines)
