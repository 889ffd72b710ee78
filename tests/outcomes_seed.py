"""Published findings with every fate and the reviews that published them (two repositories, two variants of an
experiment, two weeks), written through the store's own methods, for the outcomes CLI, page and screenshot."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from reviewer_app.core.admission import Enqueue, JobSpec
from reviewer_app.core.outcomes import Event
from reviewer_app.store.base import Delivery, FateEvent, Finding, ReviewRun
from tests.helpers import sha

REPOS = {"octo/widgets": 4_000_000_001, "octo/<b>gadgets</b>": 4_000_000_002}  # an untrusted name too
EXPERIMENT = "conf-65"
MODEL = "claude-sonnet-4-5"
TITLES = (
    ("The file is never closed on the error path", "src/load.py"),
    ("SQL injection through the `name` parameter", "app/db.py"),
    ("Off-by-one: the last index is skipped", "web/list.ts"),
    ("Rename this variable <img src=x onerror=alert(3)>", "src/util.py"),
    ("The exception is swallowed", "src/jobs.go"),
)
DAYS = 14


@dataclass
class SeededOutcomes:
    fates: dict[str, int] = field(default_factory=dict)  # how many findings have each fate
    by_repo: dict[str, int] = field(default_factory=dict)  # findings per repository
    variants: dict[str, int] = field(default_factory=dict)  # reviews per variant


async def seed_outcomes(store, now: float, *, seed: int = 41) -> SeededOutcomes:
    rng = random.Random(seed)
    out = SeededOutcomes()
    for n, (repo, rid) in enumerate(REPOS.items()):  # a job names each repository (`--repo` finds it by name)
        spec = JobSpec(repo_id=rid, repo_full_name=repo, installation_id=7, pr_number=1, head_sha=sha(n))
        await store.admit(Delivery(f"outcomes-{n}", "pull_request", "opened"), Enqueue(spec), now=now, max_attempts=3)
    job_id = 900_000
    for day in range(DAYS, 0, -1):
        for repo, rid in REPOS.items():
            job_id += 1
            pr = job_id - 900_000
            variant = "a" if pr % 2 else "b"
            at = now - day * 86400 + 600
            findings = []
            for line, (title, path) in enumerate(rng.sample(TITLES, 3), start=1):
                findings.append(
                    Finding(
                        repo_id=rid,
                        pr_number=pr,
                        job_id=job_id,
                        review_id=job_id,
                        head_sha=sha(job_id),
                        path=path,
                        line=line * 10,
                        line_text=f"line {line}",
                        before=(),
                        after=(),
                        severity=rng.choice(("critical", "warning", "warning", "suggestion")),
                        title=title,
                        body_digest=f"{job_id}-{line}",
                        comment_id=7_000_000_000 + job_id * 10 + line,
                    )
                )
            await store.record_findings(findings, now=at)
            await store.record_review_run(
                ReviewRun(
                    job_id=job_id,
                    repo_id=rid,
                    repo_full_name=repo,
                    pr_number=pr,
                    review_id=job_id,
                    head_sha=sha(job_id),
                    model=MODEL,
                    verify_model="claude-haiku-4-5",
                    prompt_version="3f2a9c1b7d04" if day > 7 else "8e61d0a5c2f9",
                    settings={"min_confidence": 50 if variant == "a" else 65, "verify": True},
                    experiment=EXPERIMENT,
                    variant=variant,
                    learnings=rng.choice((0, 0, 2)),
                    findings=len(findings),
                    usage=({"model": MODEL, "input_tokens": 20_000, "output_tokens": 1_500 + 500 * (variant == "b")},),
                    created_at=at,
                )
            )
            out.variants[variant] = out.variants.get(variant, 0) + 1
            stored = [f for f in await store.open_findings(rid, pr) if f.job_id == job_id]
            events = []
            for f in stored:
                assert f.id is not None
                roll = rng.random() + (0.2 if variant == "b" else 0.0)
                if day <= 1 and roll < 0.9:
                    continue  # today's: still open
                if roll > 0.55:
                    events.append(FateEvent(f.id, Event.CHANGED, at + 3600, "push 1a2b3c4d5e6f"))
                elif roll > 0.3:
                    events.append(FateEvent(f.id, Event.DISMISSED, at + 1800, "👎 by maintainer"))
                elif roll > 0.1:
                    events.append(FateEvent(f.id, Event.MERGED, at + 7200, "merged"))
                else:
                    events.append(FateEvent(f.id, Event.CLOSED, at + 7200, "closed"))
            await store.settle_findings(events)
            out.by_repo[repo] = out.by_repo.get(repo, 0) + len(stored)
    rows = await store.outcome_findings(since=0.0)
    for r in rows:
        out.fates[r["fate"]] = out.fates.get(r["fate"], 0) + 1
    return out
