"""What became of each published finding (its fate), and the acted-on rate over many of them (pure, no I/O).

A finding starts ``open``. Events the app already sees move it: a later push that changed the lines it commented on
(``changed``), a person with write access disputing it (``dismissed``: a 👎, a disputing reply, its thread resolved
with the code unchanged), the pull request merged or closed with it untouched. The table in ``settle`` is the whole
rule; events are ordered by when GitHub says they happened, not by when the app read them (a 👎 read after the
merge, but given before it, still dismisses the finding).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum


class Fate(StrEnum):
    OPEN = "open"  # the pull request is open and nothing has happened to the finding yet
    FIXED = "fixed"  # a later push changed the lines it commented on (or committed its suggestion), before merge
    DISMISSED = "dismissed"  # a person with write access reacted 👎, replied disputing it, or resolved its thread
    OPEN_AT_MERGE = "open_at_merge"  # merged with the finding untouched
    OPEN_AT_CLOSE = "open_at_close"  # closed without merging, the finding untouched


FATES: tuple[str, ...] = tuple(f.value for f in Fate)
# The rate's denominator: the findings whose fate says whether the team acted on them. A closed, unmerged pull
# request says nothing about its findings (abandoned work), and an open one has not decided yet.
DECIDED = (Fate.FIXED, Fate.DISMISSED, Fate.OPEN_AT_MERGE)


class Event(StrEnum):
    CHANGED = "changed"
    DISMISSED = "dismissed"
    MERGED = "merged"
    CLOSED = "closed"
    REOPENED = "reopened"


_RESULT = {
    Event.CHANGED: Fate.FIXED,
    Event.DISMISSED: Fate.DISMISSED,
    Event.MERGED: Fate.OPEN_AT_MERGE,
    Event.CLOSED: Fate.OPEN_AT_CLOSE,
}
_BY_THE_TEAM = (Fate.FIXED, Fate.DISMISSED)
_AT_THE_END = (Fate.OPEN_AT_MERGE, Fate.OPEN_AT_CLOSE)


@dataclass(frozen=True)
class Settled:
    """A finding's fate and when (GitHub's time, epoch seconds) the event that gave it happened; ``at`` is None
    while it is open."""

    fate: Fate
    at: float | None = None
    source: str = ""


def close_fate(merged: bool) -> Fate:
    return Fate.OPEN_AT_MERGE if merged else Fate.OPEN_AT_CLOSE


def settle(current: Settled, event: Event, at: float, source: str = "") -> Settled | None:
    """The finding's new fate after ``event`` happened at ``at``, or None when the event changes nothing.

    - open: any event gives its fate.
    - fixed or dismissed: the team's first word stands; an earlier one read later replaces it (a 👎 given before the
      push that changed the code, read after it). A merge or close after it changes nothing.
    - open at merge or close: the team's word given before the merge or close replaces it (read late: reactions
      have no webhook); after it, nothing does.
    - reopened after the close: open at close is open again (the pull request's episode goes on).
    """
    if event is Event.REOPENED:
        if current.fate is Fate.OPEN_AT_CLOSE and (current.at is None or at >= current.at):
            return Settled(Fate.OPEN)
        return None
    new = _RESULT[event]
    if current.fate is Fate.OPEN:
        return Settled(new, at, source)
    before = current.at is None or at < current.at
    if current.fate in _BY_THE_TEAM:
        if new in _BY_THE_TEAM and new is not current.fate and before:
            return Settled(new, at, source)
        return None
    if current.fate in _AT_THE_END and new in _BY_THE_TEAM and before:
        return Settled(new, at, source)
    return None


# -- what a finding is about, for the table by dimension -----------------------------------------------------------

# First match wins; the words are matched whole against the finding's title, lower-cased.
CATEGORIES: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "security",
        (
            "inject",
            "injection",
            "xss",
            "csrf",
            "secret",
            "token",
            "password",
            "auth",
            "unsafe",
            "escape",
            "sanitize",
            "sanitise",
            "traversal",
            "security",
            "credential",
            "permission",
            "untrusted",
        ),
    ),
    ("concurrency", ("race", "deadlock", "lock", "thread", "concurrent", "atomic", "async", "await")),
    (
        "error handling",
        (
            "exception",
            "error",
            "raise",
            "raises",
            "catch",
            "except",
            "panic",
            "unhandled",
            "fail",
            "fails",
            "failure",
            "retry",
        ),
    ),
    ("resources", ("leak", "leaks", "close", "closed", "memory", "timeout", "handle", "connection", "file")),
    ("performance", ("slow", "performance", "quadratic", "n+1", "cache", "allocation", "inefficient")),
    (
        "correctness",
        (
            "bug",
            "wrong",
            "incorrect",
            "off-by-one",
            "null",
            "none",
            "undefined",
            "overflow",
            "missing",
            "never",
            "always",
            "instead",
            "typo",
            "index",
            "bound",
            "bounds",
        ),
    ),
    ("tests", ("test", "tests", "assert", "coverage")),
    ("style", ("name", "naming", "style", "format", "comment", "docstring", "readability", "unused", "dead")),
)
OTHER = "other"
_WORDS = str.maketrans({c: " " for c in "`'\"()[]{}<>.,:;!?/\\=*#|"})


def category_of(title: str) -> str:
    """The finding's category, read from the words of its title (the model names none)."""
    words = set(title.lower().translate(_WORDS).split())
    for name, keys in CATEGORIES:
        if words & set(keys):
            return name
    return OTHER


def file_type_of(path: str) -> str:
    """The file's type as its extension (``.py``), or its name when it has none (``Dockerfile``)."""
    name = path.rsplit("/", 1)[-1]
    dot = name.rfind(".")
    return name[dot:].lower() if dot > 0 else (name or "?")


# -- the rate -----------------------------------------------------------------------------------------------------

Z95 = 1.959963984540054  # the normal quantile of a two-sided 95% interval


def wilson(successes: int, n: int, z: float = Z95) -> tuple[float, float] | None:
    """The Wilson score interval of a proportion (None when there is nothing to count): unlike the naive interval it
    stays inside 0..1 and is honest for small samples, which is what a team's first weeks give."""
    if n <= 0:
        return None
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass(frozen=True)
class Rate:
    """Counts of each fate over some findings, and the acted-on rate over the decided ones."""

    counts: Mapping[str, int]

    @property
    def fixed(self) -> int:
        return self.counts.get(Fate.FIXED, 0)

    @property
    def decided(self) -> int:
        return sum(self.counts.get(f, 0) for f in DECIDED)

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    @property
    def rate(self) -> float | None:
        """fixed / (fixed + dismissed + open_at_merge); None when none of them is decided yet."""
        return self.fixed / self.decided if self.decided else None

    @property
    def interval(self) -> tuple[float, float] | None:
        return wilson(self.fixed, self.decided)

    def as_dict(self) -> dict[str, object]:
        low_high = self.interval
        return {
            **{f: self.counts.get(f, 0) for f in FATES},
            "decided": self.decided,
            "acted_on_rate": self.rate,
            "interval_95": list(low_high) if low_high else None,
        }


def rate_of(fates: Iterable[str]) -> Rate:
    counts: dict[str, int] = {}
    for fate in fates:
        counts[fate] = counts.get(fate, 0) + 1
    return Rate(counts)


def by_dimension(rows: Sequence[Mapping[str, object]], key: str) -> list[tuple[str, Rate]]:
    """The rate per value of ``key`` of ``rows`` (each with a ``fate``), the most decided findings first."""
    groups: dict[str, list[str]] = {}
    for row in rows:
        groups.setdefault(str(row.get(key) or "?"), []).append(str(row["fate"]))
    rated = [(value, rate_of(fates)) for value, fates in groups.items()]
    return sorted(rated, key=lambda pair: (-pair[1].decided, -pair[1].total, pair[0]))


def worst(rates: Sequence[tuple[str, Rate]], *, at_least: int = 3, limit: int = 3) -> list[tuple[str, Rate]]:
    """The values with the lowest acted-on rate among those with at least ``at_least`` decided findings."""
    enough = [(v, r) for v, r in rates if r.decided >= at_least and r.rate is not None]
    return sorted(enough, key=lambda pair: (pair[1].rate, -pair[1].decided, pair[0]))[:limit]


def differ(a: Rate, b: Rate, z: float = Z95) -> bool | None:
    """Whether two rates differ at 95% (a two-proportion z-test, pooled); None when either has nothing decided.
    Small samples rarely differ: that is the point of saying so."""
    if not a.decided or not b.decided:
        return None
    pooled = (a.fixed + b.fixed) / (a.decided + b.decided)
    spread = math.sqrt(pooled * (1 - pooled) * (1 / a.decided + 1 / b.decided))
    if spread == 0:
        return False
    return abs((a.rate or 0.0) - (b.rate or 0.0)) / spread > z


def days_of(rows: Iterable[Mapping[str, object]], *, day_seconds: int = 86400) -> list[tuple[int, Rate]]:
    """The rate per day (days since the epoch) a finding was published, oldest first: the chart's points."""
    groups: dict[int, list[str]] = {}
    for row in rows:
        created = row.get("created_at")
        if isinstance(created, int | float):
            groups.setdefault(int(created // day_seconds), []).append(str(row["fate"]))
    return [(day, rate_of(groups[day])) for day in sorted(groups)]
