"""The outbox of effects to post (comments, reactions) and whether an installation is active."""

from __future__ import annotations

from reviewer_app.store.statements.dialects import Dialects, with_json_ids

INSERT_EFFECT = """
INSERT INTO outbox (kind, installation_id, repo_full_name, target, content, created_at) VALUES (?, ?, ?, ?, ?, ?)
"""

# Whether the outbox holds a comment (a help answer) for this pull request newer than the cut-off, sent or not.
COMMENTED_SINCE = """
SELECT EXISTS (SELECT 1 FROM outbox WHERE kind = 'comment' AND repo_full_name = ? AND target = ? AND created_at > ?)
"""

# Effects still to send, skipping installations that are gone and those waiting out a rate limit (a JSON array of
# ids). Parameters: skipped installations, limit.
PENDING_EFFECTS = with_json_ids("""
SELECT id, kind, installation_id, repo_full_name, target, content, created_at, attempts FROM outbox
 WHERE sent_at IS NULL AND installation_id NOT IN (SELECT id FROM installations WHERE active = 0)
   AND installation_id NOT IN ({ids})
 ORDER BY id LIMIT ?
""")

# An outbox effect was tried: count it, keep the error, and mark it sent when it went through. Parameters: error,
# done?, now, effect id.
MARK_EFFECT = Dialects(
    "UPDATE outbox SET attempts = attempts + 1, last_error = ?, sent_at = CASE WHEN ? THEN ? END WHERE id = ?",
    "UPDATE outbox SET attempts = attempts + 1, last_error = $1,"
    " sent_at = CASE WHEN $2::boolean THEN $3::double precision END WHERE id = $4",
)

SELECT_INSTALLATION_ACTIVE = "SELECT active FROM installations WHERE id = ?"

__all__ = ["INSERT_EFFECT", "COMMENTED_SINCE", "PENDING_EFFECTS", "MARK_EFFECT", "SELECT_INSTALLATION_ACTIVE"]
