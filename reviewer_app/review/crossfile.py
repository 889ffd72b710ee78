"""The codebase at the review's head, for the gather stage: the changed files' head text the review already read
handed to the codebase room, and, for each part of the review, the cross-file code its changes relate to (callers,
callees, interfaces), chosen within the part's reserve of the token budget."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import Mapping, Sequence

from reviewer_app.codebase import ArchiveSource, ChangedText, Codebase, CodebaseSettings, Snippet, open_codebase
from reviewer_app.core.diff import FileDiff
from reviewer_app.core.tokens import estimate_tokens
from reviewer_app.review.prompt import PromptFile
from reviewer_app.review.selection import ChangedFile

log = logging.getLogger(__name__)


def added_text(diff: FileDiff) -> str | None:
    """An added file's text from its diff (every line is an added line); None when the diff does not hold it all."""
    lines = [ln.text for h in diff.hunks for ln in h.lines if ln.kind == "added"]
    if not lines or len(diff.hunks) != 1 or diff.hunks[0].new_start != 1:
        return None
    return "\n".join(lines) + "\n"


def changed_texts(changed: Sequence[ChangedFile], files: Mapping[str, PromptFile]) -> dict[str, ChangedText]:
    """What the pull request did to each file, as far as the review read it: removed files gone, renamed ones moved,
    the head text of those read, and the diff of those not read (the codebase applies it to the base's text); any
    other changed file is left out of the tree (never served as the base had it)."""
    out: dict[str, ChangedText] = {}
    for c in changed:
        previous = c.previous_path if c.status == "renamed" else None
        if c.status == "removed":
            out[c.path] = ChangedText(c.path, None)
            continue
        shown = files.get(c.path)
        text: str | None = None
        if shown is not None and shown.head_lines is not None:
            text = "\n".join(shown.head_lines)
        elif shown is not None and c.status == "added":
            text = added_text(shown.diff)
        diff = shown.diff if shown is not None and text is None and (shown.diff.hunks or previous) else None
        # A file with neither (not shown, or no text change sent) is left out of the tree rather than shown as the
        # base had it: the model's tools read it from GitHub at the head.
        out[c.path] = ChangedText(c.path, text, previous, diff)
    return out


async def open_for_review(
    source: ArchiveSource,
    settings: CodebaseSettings,
    *,
    installation_id: int,
    repo: str,
    pr: Mapping[str, object],
    head_sha: str,
    changed: Sequence[ChangedFile],
    files: Mapping[str, PromptFile],
) -> Codebase | None:
    """The codebase at ``head_sha``, from the pull request's base; None when it cannot be had (logged)."""
    base = pr.get("base") if isinstance(pr.get("base"), dict) else {}
    base_sha = str(base.get("sha") or "") if isinstance(base, dict) else ""
    base_ref = str(base.get("ref") or "") if isinstance(base, dict) else ""
    if not base_sha:
        return None
    return await open_codebase(
        source,
        settings,
        installation_id=installation_id,
        repo=repo,
        base_ref=base_ref,
        base_sha=base_sha,
        head_sha=head_sha,
        changed=changed_texts(changed, files),
    )


def _spans(diff: FileDiff) -> list[tuple[int, int]]:
    """The new-side lines each hunk covers (a deletion: the line where it happened)."""
    spans: list[tuple[int, int]] = []
    for h in diff.hunks:
        first = max(h.new_start, 1)
        spans.append((first, first + max(h.new_length, 1) - 1))
    return spans


def related_code(codebase: Codebase, files: Sequence[PromptFile], budget_tokens: int) -> tuple[list[Snippet], int]:
    """The cross-file code of every change in ``files``, nearest first per change, within ``budget_tokens``, each
    snippet once; and how many related snippets were left out."""
    chosen: list[Snippet] = []
    left_out = 0
    spent = 0
    for f in files:
        if f.status == "removed":
            continue
        for first, last in _spans(f.diff):
            room = budget_tokens - spent
            if room <= 0:
                left_out += 1
                continue
            snippets, out = codebase.related(f.path, first, last, budget_tokens=room)
            left_out += out
            for s in snippets:
                if any(o.path == s.path and o.start <= s.end and s.start <= o.end for o in chosen):
                    continue
                chosen.append(s)
                spent += snippet_tokens(s)
    return chosen, left_out


def snippet_tokens(s: Snippet) -> int:
    """What a snippet costs in the prompt: its lines (numbered) and its frame."""
    return estimate_tokens(s.text) + estimate_tokens(f"{s.path} {s.why}") + 2 * (s.end - s.start + 1) + 10


async def related_for_part(
    codebase: Codebase | None, files: Sequence[PromptFile], budget_tokens: int
) -> tuple[tuple[Snippet, ...], int]:
    """``related_code`` off the event loop (it reads and parses files); nothing without a codebase or a budget."""
    if codebase is None or budget_tokens <= 0:
        return (), 0
    try:
        snippets, left_out = await asyncio.to_thread(related_code, codebase, files, budget_tokens)
    except (OSError, ValueError, sqlite3.Error) as exc:
        log.warning("cross-file context left out: %s", exc)
        return (), 0
    return tuple(snippets), left_out
