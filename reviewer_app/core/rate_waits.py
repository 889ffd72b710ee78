"""Installations waiting out a GitHub rate limit: a housekeeping pass skips them until their reset and carries on
with the others (pure: the caller says what time it is)."""

from __future__ import annotations


class RateWaits:
    """Until when each installation's requests wait. One installation's limit is that installation's: check runs,
    replies and sweeps of the others go on meanwhile."""

    def __init__(self) -> None:
        self._until: dict[int, float] = {}

    def wait(self, installation_id: int, until: float) -> None:
        """GitHub asked ``installation_id``'s requests to wait until ``until`` (epoch seconds)."""
        self._until[installation_id] = max(until, self._until.get(installation_id, until))

    def waiting(self, installation_id: int | None, now: float) -> bool:
        """Whether ``installation_id`` is still waiting at ``now``."""
        until = self._until.get(installation_id) if installation_id is not None else None
        return until is not None and now < until

    def skipped(self, now: float) -> list[int]:
        """The installations still waiting at ``now``, in id order (ended waits are forgotten)."""
        for installation_id in [i for i, until in self._until.items() if until <= now]:
            del self._until[installation_id]
        return sorted(self._until)
