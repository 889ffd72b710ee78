"""The store's multi-statement operations, written once as procedures over named statements (statements/), by
concern; imported as one surface (``from reviewer_app.store import procedures as p``).

A procedure is a generator: it yields one step at a time (a statement to run, or a wake-up to send after the commit)
and receives the step's result. It never touches a connection, so each driver runs it in its own terms: SQLite in
its writer thread, inside a group-committed transaction; PostgreSQL on a pooled connection, awaiting each step. A
statement a dialect does not need (``Dialects(..., None)``) is skipped and answers None.

    steps       Rows, Row, Count, Insert, Many, Later, Wake: what a procedure yields
    admission   admit (a delivery and its decision), prepare_enqueue, lock_order
    leases      claim, renew, finish (alone or together), retry, progress, skip, usage, rescue
    writes      one-statement writes; settings, the operator's retry, redelivery claims, prune
    batches     Message Batches: settle a request, withdraw those of ended jobs
"""

from reviewer_app.store.procedures.admission import *  # noqa: F403
from reviewer_app.store.procedures.batches import *  # noqa: F403
from reviewer_app.store.procedures.leases import *  # noqa: F403
from reviewer_app.store.procedures.steps import *  # noqa: F403
from reviewer_app.store.procedures.writes import *  # noqa: F403
