"""Settings (the queue's and a pull request's pause) and the keys that make a write happen once (applied commands)."""

from __future__ import annotations

UPSERT_SETTING = (
    "INSERT INTO settings (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value"
)
SELECT_SETTING = "SELECT value FROM settings WHERE key = ?"
# Record a state-changing command (core.admission.applied_command_key) unless it was already: 1 row, first time.
CLAIM_COMMAND_IF_NEW = "INSERT INTO settings (key, value) VALUES (?, ?) ON CONFLICT (key) DO NOTHING"

__all__ = ["UPSERT_SETTING", "SELECT_SETTING", "CLAIM_COMMAND_IF_NEW"]
