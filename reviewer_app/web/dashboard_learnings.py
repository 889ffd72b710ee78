"""The dashboard's Learnings page (read-only): every repository's learnings with their sources, and the feedback
people gave on the app's findings (pure: from what the store read to HTML, every untrusted text escaped)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

from reviewer_app.core.learnings import Learning, finding_key, source_label
from reviewer_app.store.base import Finding
from reviewer_app.web.dashboard_pages import e, num, one_line, table, td

FEEDBACK_SHOWN = 20  # findings with feedback listed per repository, most -1 first


def _when(at: datetime | None) -> str:
    return at.strftime("%Y-%m-%d %H:%M UTC") if at else "never"


def _source(x: Learning) -> str:
    label = e(f"{source_label(x)}, {_when(x.created_at)}")
    if x.source_url and x.source_url.startswith(("https://", "http://")):
        return f"<td><a href='{e(x.source_url)}' rel=noreferrer>{label}</a></td>"
    return f"<td>{label}</td>"


def named_findings(findings: Sequence[Finding]) -> dict[str, str]:
    """What each feedback key names: the file and title of the newest finding with that content."""
    out: dict[str, str] = {}
    for f in findings:
        out.setdefault(finding_key(f.path, f.line_text, f.body_digest), f"{f.path}: {f.title}")
    return out


def learnings_page(
    repos: Sequence[tuple[str, str | None]],
    learnings: Mapping[str, Sequence[Learning]],
    feedback: Mapping[str, Mapping[str, tuple[int, int]]],
    names: Mapping[str, Mapping[str, str]],
) -> str:
    """One section per repository (``repos``: id and full name), its learnings oldest first, then the findings people
    reacted to, most -1 first (``names``: what each finding key names, as far as the newest findings tell)."""
    intro = (
        "<p id=summary class=muted>What each repository's team taught its reviews (<code>/review learn</code>, the "
        "CLI), with where it came from and how often reviews applied it. A learning a reply proposed is pending until "
        "someone with write access confirms it, and never used before. Only the team removes one "
        "(<code>/review forget ID</code>, <code>reviewer-app learnings remove</code>).</p>"
    )
    if not repos:
        return intro + "<p class=muted>No repository has learnings yet.</p>"
    sections = []
    for repo, name in repos:
        rows = [
            [
                num(x.id),
                td(x.kind),
                td(x.status if x.active else "pending: not used until someone with write access confirms it"),
                td(x.path_glob or "(all files)"),
                td(x.text),
                _source(x),
                num(x.times_applied),
                td(_when(x.last_applied)),
            ]
            for x in learnings.get(repo, ())
        ]
        voted = sorted(feedback.get(repo, {}).items(), key=lambda kv: (-kv[1][1], -kv[1][0], kv[0]))
        named = names.get(repo, {})
        votes = [
            [td(one_line(named[key])) if key in named else f"<td><code>{e(key[:12])}</code></td>", num(up), num(down)]
            for key, (up, down) in voted
        ]
        sections.append(
            f"<h2 id='repo-{e(repo)}'>{e(name or f'repository {repo}')}</h2>"
            + table(
                ("id", "kind", "status", "path", "learning", "source", "applied", "last applied"),
                rows,
                numeric=(0, 6),
                empty="No learnings.",
            )
            + (
                "<p class=muted>Feedback on the app's findings (by the finding's content, across pull requests):</p>"
                + table(("finding", "+1", "-1"), votes[:FEEDBACK_SHOWN], numeric=(1, 2))
                if votes
                else ""
            )
        )
    return intro + "".join(sections)
