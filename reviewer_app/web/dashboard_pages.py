"""The dashboard's HTML: pure functions from what the store read to a page, every untrusted text escaped."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from html import escape
from typing import Any
from urllib.parse import urlencode

from reviewer_app import __version__
from reviewer_app.admin_text import duration
from reviewer_app.core.job_records import WouldPublish
from reviewer_app.core.queues import QueueRow, describe_loads
from reviewer_app.core.states import JobState
from reviewer_app.store.base import Attempt, Job, WorkerStatus
from reviewer_app.web.dashboard_spend import SPEND_COLUMNS, Spend

NAV = (
    ("/dashboard", "Queue"),
    ("/dashboard/workers", "Workers"),
    ("/dashboard/jobs", "Jobs"),
    ("/dashboard/spend", "Spend"),
    ("/dashboard/learnings", "Learnings"),
    ("/dashboard/outcomes", "Outcomes"),
)

STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:0;color:#1f2328;background:#f6f8fa}
header{background:#24292f;color:#fff;padding:.6em 1.5em;display:flex;gap:1.5em;align-items:center}
header a{color:#fff;text-decoration:none}header a.here{font-weight:700;text-decoration:underline}
header form{margin-left:auto}main{padding:1em 1.5em;max-width:1200px}
h1{font-size:1.4em}h2{font-size:1.1em;margin-top:1.6em}
table{border-collapse:collapse;background:#fff;margin:.5em 0}
th,td{border:1px solid #d0d7de;padding:.3em .6em;text-align:left;vertical-align:top}
td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}
.cards{display:flex;flex-wrap:wrap;gap:.8em}.card{background:#fff;border:1px solid #d0d7de;padding:.6em 1em;min-width:7em}
.card b{display:block;font-size:1.6em}.gone{color:#cf222e;font-weight:700}.alive{color:#1a7f37}
.paused{background:#fff8c5;border:1px solid #d4a72c;padding:.5em 1em}.muted{color:#59636e}
form.filter{display:flex;gap:.6em;align-items:end;flex-wrap:wrap}label{display:flex;flex-direction:column}
pre{white-space:pre-wrap;max-width:60em;margin:0}img.chart{max-width:100%;background:#fff;border:1px solid #d0d7de}
svg{max-width:100%;height:auto}.significant{color:#1a7f37;font-weight:700}.not-significant{color:#9a6700}
"""


def e(value: object) -> str:
    """Untrusted text (repository names, errors, outcomes, what the model wrote) as HTML text or attribute."""
    return escape("" if value is None else str(value), quote=True)


def when(ts: float | None) -> str:
    if ts is None:
        return "-"
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def ago(ts: float | None, now: float) -> str:
    if ts is None:
        return "-"
    return f"{duration(now - ts)} ago" if ts <= now else f"in {duration(ts - now)}"


def time_cell(ts: float | None, now: float) -> str:
    return f"<td title='{e(when(ts))}'>{e(ago(ts, now))}</td>"


def page(title: str, body: str, *, nonce: str, here: str = "", signed_in: bool = True) -> str:
    nav = ""
    if signed_in:
        links = "".join(f"<a href='{href}'{' class=here' if href == here else ''}>{name}</a>" for href, name in NAV)
        nav = (
            # The version only to those signed in: a login page need not tell anyone what to attack.
            f"<header><b>reviewer-app</b> <span class=muted title=version>{e(__version__)}</span>{links}"
            "<form method=post action='/dashboard/logout'><button type=submit>Log out</button></form></header>"
        )
    return (
        f"<!doctype html><html lang=en><head><meta charset=utf-8><title>{e(title)} · reviewer-app</title>"
        f"<meta name=viewport content='width=device-width'><style nonce='{nonce}'>{STYLE}</style></head>"
        f"<body>{nav}<main><h1>{e(title)}</h1>{body}</main></body></html>"
    )


def login_form(*, error: str = "") -> str:
    problem = f"<p class=gone role=alert>{e(error)}</p>" if error else ""
    return (
        f"{problem}<form method=post action='/dashboard/login'>"
        "<label>Dashboard token <input type=password name=token autocomplete=current-password required autofocus>"
        "</label> <button type=submit>Log in</button></form>"
        "<p class=muted>The token is REVIEWER_DASHBOARD_TOKEN of this server. The dashboard only shows: nothing on it"
        " changes a job.</p>"
    )


def table(head: Sequence[str], rows: Iterable[Sequence[str]], *, numeric: Iterable[int] = (), empty: str = "") -> str:
    """``rows`` are cells already rendered as HTML (``<td>...</td>`` each)."""
    num = set(numeric)
    ths = "".join(f"<th{' class=n' if i in num else ''}>{e(h)}</th>" for i, h in enumerate(head))
    body = "".join(f"<tr>{''.join(r)}</tr>" for r in rows)
    if not body:
        return f"<p class=muted>{e(empty)}</p>" if empty else ""
    return f"<table><thead><tr>{ths}</tr></thead><tbody>{body}</tbody></table>"


def td(value: object) -> str:
    return f"<td>{e(value)}</td>"


def num(value: int | float) -> str:
    return f"<td class=n>{value:,}</td>"


def money(value: float | None, *, unpriced: bool = False) -> str:
    """A cost; ``unpriced``: part of it is of a model without a price (shown as "+ ?")."""
    if value is None:
        return "<td class=n>?</td>"
    return f"<td class=n>${value:,.2f}{' + ?' if unpriced else ''}</td>"


def job_link(job_id: int) -> str:
    return f"<td><a href='/dashboard/jobs/{job_id}'>{job_id}</a></td>"


def pr_cell(job: Job) -> str:
    return f"<td>{e(job.repo_full_name)}#{job.pr_number}</td>"


def one_line(text: str | None, width: int = 140) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= width else text[: width - 1] + "…"


# -- pages ----------------------------------------------------------------------------------------------------


def queue_page(
    *,
    now: float,
    by_state: Mapping[str, int],
    oldest_pending: float | None,
    expired_leases: int,
    awaiting_reconciliation: int,
    paused: bool,
    running: Sequence[Job],
    failed: Sequence[Job],
    queues: Sequence[QueueRow] = (),
) -> str:
    def card(state: JobState) -> str:
        what = state.value if state in (JobState.QUEUED, JobState.RUNNING) else f"{state.value} (24 h)"
        return f"<div class=card id='count-{state.value}'><b>{by_state.get(state.value, 0):,}</b>{what}</div>"

    cards = "".join(card(s) for s in JobState)
    age = "none pending" if oldest_pending is None else duration(now - oldest_pending)
    cards += f"<div class=card id=oldest-pending><b>{e(age)}</b>oldest pending</div>"
    cards += f"<div class=card id=expired-leases><b>{expired_leases:,}</b>expired leases</div>"
    cards += (
        f"<div class=card id=awaiting-reconciliation><b>{awaiting_reconciliation:,}</b>publications to reconcile</div>"
    )
    pause = (
        "<p class=paused id=paused>The queue is <b>paused</b>: running jobs finish, nothing new is claimed"
        " (<code>reviewer-app queue resume</code> resumes it).</p>"
        if paused
        else "<p id=paused>The queue is running.</p>"
    )
    run_rows = (
        [
            job_link(j.id),
            pr_cell(j),
            td(j.head_sha[:10]),
            td(f"{j.attempts}/{j.max_attempts}"),
            td(j.lease_owner),
            time_cell(j.lease_expires_at, now),
            time_cell(j.started_at, now),
        ]
        for j in running
    )
    failed_rows = (
        [job_link(j.id), pr_cell(j), time_cell(j.finished_at, now), f"<td><pre>{e(one_line(j.last_error))}</pre></td>"]
        for j in failed
    )
    queue_rows = (
        [td(q.queue), "<td>-</td>" if q.queued is None else num(q.queued), num(q.running), num(q.slots)] for q in queues
    )
    return (
        f"{pause}<div class=cards>{cards}</div>"
        "<p class=muted>Queued and running: now. Finished states: jobs that finished in the last 24 hours.</p>"
        "<h2>Queues</h2><p class=muted>Each kind of work has slots of its own: a question never waits for a review"
        " slot. Slots: of the processes alive now; housekeeping runs background passes, not jobs.</p>"
        + table(("queue", "queued", "running", "slots"), queue_rows, numeric=(1, 2, 3), empty="No queue.")
        + f"<h2>Running now ({len(running)})</h2>"
        + table(
            ("job", "pull request", "head", "attempt", "owner", "lease expires", "first started"),
            run_rows,
            empty="No job is running.",
        )
        + f"<h2>Failed in the last day ({len(failed)})</h2>"
        + table(("job", "pull request", "failed", "reason"), failed_rows, empty="No job failed in the last day.")
    )


def workers_page(*, now: float, workers: Sequence[WorkerStatus]) -> str:
    rows = []
    for w in workers:
        i = w.info
        status = "<td class=gone>gone</td>" if w.gone else "<td class=alive>alive</td>"
        # A live process renews its leases; a gone one's expire, and the rescuer hands the jobs back then.
        held = ", ".join(
            f"<a href='/dashboard/jobs/{h.job_id}'>{h.job_id}</a> {e(h.repo)}#{h.pr_number}"
            + (f" (rescued {e(ago(h.lease_expires_at, now))})" if w.gone else "")
            for h in w.held
        )
        rows.append(
            [
                status,
                td(i.role),
                td(i.host),
                num(i.pid),
                td(i.version),
                td(describe_loads(i.queues) or f"{i.jobs_running}/{i.slots}"),
                time_cell(i.heartbeat_at, now),
                time_cell(i.started_at, now),
                f"<td>{held or '-'}</td>",
            ]
        )
    alive = sum(1 for w in workers if not w.gone)
    return (
        f"<p id=summary>{alive} alive, {len(workers) - alive} gone. A process is gone when its heartbeat is older than"
        " its lease; the jobs it held go back to the queue when their leases expire.</p>"
        + table(
            ("status", "role", "host", "pid", "version", "busy/slots", "heartbeat", "started", "jobs held"),
            rows,
            numeric=(3,),
            empty="No process is registered.",
        )
    )


def jobs_page(
    *, now: float, jobs: Sequence[Job], repo: str, pr: str, state: str, next_before: int | None, error: str = ""
) -> str:
    options = "".join(
        f"<option value='{s.value}'{' selected' if s.value == state else ''}>{s.value}</option>" for s in JobState
    )
    form = (
        "<form class=filter method=get action='/dashboard/jobs'>"
        f"<label>repository <input name=repo value='{e(repo)}' placeholder='owner/name'></label>"
        f"<label>pull request <input name=pr value='{e(pr)}' inputmode=numeric size=6></label>"
        f"<label>state <select name=state><option value=''>any</option>{options}</select></label>"
        "<button type=submit>Filter</button></form>"
    )
    problem = f"<p class=gone role=alert>{e(error)}</p>" if error else ""
    rows = (
        [
            job_link(j.id),
            td(j.state.value),
            pr_cell(j),
            td(j.head_sha[:10]),
            td(j.trigger),
            td(f"{j.attempts}/{j.max_attempts}"),
            time_cell(j.created_at, now),
            td(one_line(j.outcome or j.last_error, 100)),
        ]
        for j in jobs
    )
    more = ""
    if next_before is not None:
        query = urlencode(
            {k: v for k, v in (("repo", repo), ("pr", pr), ("state", state)) if v} | {"before": next_before}
        )
        more = f"<p><a id=older href='/dashboard/jobs?{e(query)}'>Older jobs →</a></p>"
    return (
        form
        + problem
        + table(
            ("job", "state", "pull request", "head", "trigger", "attempts", "created", "outcome / last error"),
            rows,
            empty="No job matches.",
        )
        + more
    )


def job_page(
    *, now: float, job: Job, attempts: Sequence[Attempt], links: Mapping[str, str], costs: Sequence[float | None]
) -> str:
    facts = [
        ("state", e(job.state.value)),
        ("pull request", f"{e(job.repo_full_name)}#{job.pr_number}"),
        ("head", e(job.head_sha)),
        ("trigger", e(job.trigger)),
        ("attempts", f"{job.attempts}/{job.max_attempts}"),
        ("created", e(when(job.created_at))),
        ("started", e(when(job.started_at))),
        ("finished", e(when(job.finished_at))),
        ("next attempt", e(when(job.next_attempt_at)) if job.state == JobState.QUEUED else "-"),
        (
            "lease",
            f"{e(job.lease_owner)}, expires {e(ago(job.lease_expires_at, now))}"
            if job.state == JobState.RUNNING
            else "-",
        ),
        ("outcome", f"<pre>{e(job.outcome)}</pre>" if job.outcome else "-"),
        ("last error", f"<pre>{e(job.last_error)}</pre>" if job.last_error else "-"),
    ]
    if job.superseded_by is not None:
        facts.append(("superseded by", f"<a href='/dashboard/jobs/{job.superseded_by}'>{job.superseded_by}</a>"))
    names = {"pull_request": "pull request", "check_run": "check run", "review": "review"}
    link_html = " · ".join(
        f"<a id='link-{key}' href='{e(url)}' rel='noreferrer noopener'>{names.get(key, key)} on GitHub</a>"
        for key, url in links.items()
    )
    facts.append(("on GitHub", link_html))
    fact_rows = "".join(f"<tr><th>{e(k)}</th><td>{v}</td></tr>" for k, v in facts)
    rows = []
    for a, cost in zip(attempts, costs, strict=True):
        took = duration(a.finished_at - a.started_at) if a.finished_at is not None else "running"
        rows.append(
            [
                num(a.attempt),
                td(a.lease_owner),
                td(when(a.started_at)),
                td(took),
                td(a.outcome or "-"),
                f"<td><pre>{e(a.error)}</pre></td>" if a.error else "<td>-</td>",
                td(a.model or "-"),
                num(a.input_tokens),
                num(a.output_tokens),
                num(a.cache_creation_tokens),
                num(a.cache_read_tokens),
                money(cost) if a.input_tokens or a.output_tokens else "<td class=n>-</td>",
            ]
        )
    total_in = sum(a.input_tokens for a in attempts)
    total_out = sum(a.output_tokens for a in attempts)
    known = [c for c in costs if c is not None]
    total_cost = f"${sum(known):,.2f}" if known else "-"
    return (
        f"<table id=facts>{fact_rows}</table>"
        + held_back_section(job.details.would_publish)
        + f"<h2>Token usage</h2><p id=usage>{total_in:,} input and {total_out:,} output tokens over"
        f" {len(attempts)} attempt(s), estimated {e(total_cost)}.</p>"
        "<h2>Attempts</h2>"
        + table(
            (
                "#",
                "worker",
                "started",
                "took",
                "outcome",
                "error",
                "model",
                "input",
                "output",
                "cache write",
                "cache read",
                "est. cost",
            ),
            rows,
            numeric=(0, 7, 8, 9, 10, 11),
            empty="No attempt yet.",
        )
    )


def held_back_section(would: WouldPublish | None) -> str:
    """A dry run's review or answer (review/dry_run.py) as the Markdown GitHub would have got, shown as text: what
    the model wrote is never rendered as HTML here."""
    if would is None:
        return ""
    kind = "answer" if would.kind == "answer" else "review"
    parts = [
        f"<h2>Would have posted (dry run)</h2><p id=dry-run>Nothing was posted: {e(would.why or 'dry run')}. "
        f"The {kind}, as GitHub would have got it:</p>",
        f"<pre id=would-publish>{e(would.body)}</pre>",
    ]
    for c in would.comments:
        start = c.get("start_line")
        where = f"lines {start}-{c.get('line')}" if start else f"line {c.get('line')}"
        parts.append(
            f"<h3 class=would-comment>{e(c.get('path'))} {e(where)} ({e(c.get('side') or 'RIGHT')})</h3>"
            f"<pre>{e(c.get('body'))}</pre>"
        )
    return "".join(parts)


def spend_page(*, days: int, spend: Spend) -> str:
    """The chart, the table behind it (cost per day of each repository it draws), and the tokens per repository
    and per day. Rows of ``spend.totals`` and ``spend.per_day`` have ``jobs``, the token columns, ``cost`` and
    ``unpriced``. Days without any spend are left out of the tables."""
    head = (
        "jobs",
        *(name for name, _ in SPEND_COLUMNS),
        "of them batched",
        "est. cost",
        "of it verification",
        "saved by batching",
    )

    def cells(r: Mapping[str, Any]) -> list[str]:
        return [
            num(r["jobs"]),
            *(num(r[key]) for _, key in SPEND_COLUMNS),
            num(r["batched_tokens"]),
            money(r["cost"], unpriced=r["unpriced"]),
            money(r["verify_cost"]),
            money(r["saved"]),
        ]

    total_cost = sum(r["cost"] for r in spend.totals)
    total_saved = sum(r["saved"] for r in spend.totals)
    total_verify = sum(r["verify_cost"] for r in spend.totals)
    names = list(spend.series)
    spent = [(i, day) for i, day in enumerate(spend.per_day) if day["jobs"]][::-1]
    behind = [
        [td(day["date"]), *(money(spend.series[n][i]) for n in names), money(day["cost"], unpriced=day["unpriced"])]
        for i, day in spent
    ]
    return (
        f"<p id=total>Estimated cost of the last {days} days: <b>${total_cost:,.2f}</b>, of which the verification of"
        f" findings cost <b id=verify>${total_verify:,.2f}</b> and Message Batches saved"
        f" <b id=saved>${total_saved:,.2f}</b> (list prices per model, batched tokens at their batch price:"
        " REVIEWER_PRICES adds or overrides them; a model without a price shows ?).</p>"
        "<img class=chart id=chart src='/dashboard/spend.svg' width=960 height=400"
        f" alt='Estimated cost per day and repository over the last {days} days'>"
        "<h2>Cost per day (the chart's numbers)</h2>"
        + table(("day (UTC)", *names, "all"), behind, numeric=range(1, len(names) + 2), empty="No spend.")
        + "<h2>Per repository</h2>"
        + table(
            ("repository", *head),
            ([td(r["repo"]), *cells(r)] for r in spend.totals),
            numeric=range(1, len(head) + 1),
            empty="No model tokens were spent in this period.",
        )
        + "<h2>Tokens per day</h2>"
        + table(
            ("day (UTC)", *head),
            ([td(day["date"]), *cells(day)] for _, day in spent),
            numeric=range(1, len(head) + 1),
            empty="No spend.",
        )
    )
