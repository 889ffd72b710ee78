"""Missed-webhook recovery (tables of migration 0003): the deliveries not admitted, and a redelivery asked for once
across hosts."""

from __future__ import annotations

from reviewer_app.store.statements.dialects import Dialects

SELECT_DELIVERY_ID = "SELECT 1 FROM deliveries WHERE delivery_id = ?"

# GUIDs (a JSON array) neither admitted here nor already asked for again.
DELIVERIES_TO_RECOVER = Dialects(
    "SELECT j.value FROM json_each(?) AS j"
    " WHERE NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.delivery_id = j.value)"
    "   AND NOT EXISTS (SELECT 1 FROM redeliveries r WHERE r.guid = j.value AND r.requested_at IS NOT NULL)",
    "SELECT g FROM json_array_elements_text($1::json) AS g"
    " WHERE NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.delivery_id = g)"
    "   AND NOT EXISTS (SELECT 1 FROM redeliveries r WHERE r.guid = g AND r.requested_at IS NOT NULL)",
)

# Claim one GUID for a redelivery request: new, or left unfinished by a claimer that died or gave it back.
CLAIM_REDELIVERY_IF_UNCLAIMED = """
INSERT INTO redeliveries (guid, delivery_id, owner, claimed_at) VALUES (?, ?, ?, ?)
ON CONFLICT (guid) DO UPDATE SET delivery_id = excluded.delivery_id, owner = excluded.owner,
                                 claimed_at = excluded.claimed_at
 WHERE redeliveries.requested_at IS NULL AND redeliveries.claimed_at < ?
RETURNING guid
"""

# GitHub took the request (or refused it for good, with the error): never ask for this GUID again.
MARK_REDELIVERY_REQUESTED_IF_CLAIMED = """
UPDATE redeliveries SET requested_at = ?, error = ? WHERE guid = ? AND owner = ? AND requested_at IS NULL
"""

# The request failed for now: keep the error, and let the next pass (of any host) claim the GUID again.
RELEASE_REDELIVERY_IF_CLAIMED = """
UPDATE redeliveries SET claimed_at = 0, error = ? WHERE guid = ? AND owner = ? AND requested_at IS NULL
"""

# Rows about deliveries GitHub no longer keeps.
FORGET_REDELIVERIES = """
DELETE FROM redeliveries WHERE COALESCE(requested_at, claimed_at) < ?
"""

__all__ = [
    "SELECT_DELIVERY_ID",
    "DELIVERIES_TO_RECOVER",
    "CLAIM_REDELIVERY_IF_UNCLAIMED",
    "MARK_REDELIVERY_REQUESTED_IF_CLAIMED",
    "RELEASE_REDELIVERY_IF_CLAIMED",
    "FORGET_REDELIVERIES",
]
