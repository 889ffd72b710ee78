"""`reviewer-app serve --no-worker` with the store's admission stubbed out: every webhook is verified, parsed,
routed and decided as usual, but ``admit`` answers at once and nothing is written.

For the admission benchmark's ceiling: how close to the bare handler the receiver gets when storage costs nothing.

    python bench/admission.py --runs 3 --admission-cmd "python bench/stub_store_server.py"

(the database check of each run then reports the missing rows, which is expected here.)
"""

from __future__ import annotations

import itertools
import sys

from reviewer_app.cli import main as cli
from reviewer_app.store import sqlite
from reviewer_app.store.base import AdmitResult

_ids = itertools.count(1)


async def _admit(self, delivery, decision, *, now, max_attempts):  # noqa: ANN001, ANN202 - same shape as admit
    return AdmitResult("enqueued", job_id=next(_ids))


if __name__ == "__main__":
    sqlite.SqliteStore.admit = _admit  # type: ignore[method-assign]
    sys.argv = ["reviewer-app", "serve", "--no-worker"]
    sys.exit(cli.main())
