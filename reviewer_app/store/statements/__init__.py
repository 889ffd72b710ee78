"""Named SQL of the store, by concern, each name saying the guard it applies; imported as one surface
(``from reviewer_app.store import statements as s``). A statement is written once with ``?`` placeholders where
both dialects agree (the PostgreSQL driver renumbers them), as a ``Dialects`` pair, next to its concern's other
statements, only where they really differ (dialects.py).

    dialects     Dialects, numbered, for_sqlite, for_postgres
    jobs         the jobs table's columns and state lists, shared by every concern
    locks        PostgreSQL's advisory locks (migrations, admission)
    admission    delivery claims, the pre-check, the insert, installation and repository cancels
    limits       the counts admission's guards read
    pr_work      a pull request's pending jobs: supersede, follow, close, learn, resume
    leases       claim, renew, finish (alone or batched), requeue, skip, rescue
    check_runs   the check-run sync and its guarded writes
    findings     published reviews and their findings
    learnings    a repository's learnings, the feedback on its findings
    outcomes     the fates of published findings, the record of each published review
    outbox       effects to post, installations
    settings     settings and once-only command keys
    recovery     missed-webhook recovery
    workers      the worker registry and duty leases
    usage        model tokens per repository and per day
    batches      Message Batches requests
    reads        the dashboard's, metrics' and admin CLI's reads; the operator's cancel and retry
    retention    pruning
"""

from reviewer_app.store.statements.admission import *  # noqa: F403
from reviewer_app.store.statements.batches import *  # noqa: F403
from reviewer_app.store.statements.check_runs import *  # noqa: F403
from reviewer_app.store.statements.dialects import *  # noqa: F403
from reviewer_app.store.statements.findings import *  # noqa: F403
from reviewer_app.store.statements.jobs import *  # noqa: F403
from reviewer_app.store.statements.learnings import *  # noqa: F403
from reviewer_app.store.statements.leases import *  # noqa: F403
from reviewer_app.store.statements.limits import *  # noqa: F403
from reviewer_app.store.statements.locks import *  # noqa: F403
from reviewer_app.store.statements.outbox import *  # noqa: F403
from reviewer_app.store.statements.outcomes import *  # noqa: F403
from reviewer_app.store.statements.pr_work import *  # noqa: F403
from reviewer_app.store.statements.reads import *  # noqa: F403
from reviewer_app.store.statements.recovery import *  # noqa: F403
from reviewer_app.store.statements.retention import *  # noqa: F403
from reviewer_app.store.statements.settings import *  # noqa: F403
from reviewer_app.store.statements.usage import *  # noqa: F403
from reviewer_app.store.statements.workers import *  # noqa: F403
