"""The repository at a pull request's head, for the review stages: the base branch's archive (cached on disk)
overlaid with the pull request's changed files, an index of definitions and references over it, and bounded searches.
Review stages use it only through this interface (``Codebase``, ``Snippet``, ``open_codebase``); it is an
optimisation any host rebuilds, never state."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from reviewer_app.core.diff import FileDiff


@dataclass(frozen=True)
class Snippet:
    """Code shown to the model, framed as untrusted repository data."""

    path: str
    start: int  # 1-based, inclusive
    end: int
    text: str
    why: str  # "caller of parse_config", "definition of Token.verify", "implements Store" ...
    distance: int  # 0 nearest: the ranking key


class ArchiveSource(Protocol):
    """Where a repository's archive comes from (the GitHub client): one REST request for the redirect, the download
    itself not counted against the installation's limit."""

    async def download_archive(self, installation_id: int, repo: str, ref: str, dest: Path, *, max_bytes: int) -> None:
        """Write the gzipped tarball of ``repo`` at ``ref`` to ``dest``; raise ``JobError`` when it cannot be had,
        ``ArchiveTooLarge`` (core/errors.py) past ``max_bytes``."""
        ...


@dataclass(frozen=True)
class ChangedText:
    """A changed file of the pull request as the review read it at the head: ``text`` None when removed (or not
    text), ``previous_path`` for a rename. A file the review did not read has ``text`` None and its ``diff``: the
    head is the base's text with the diff applied, or the file is left out (never shown as the base had it)."""

    path: str
    text: str | None
    previous_path: str | None = None
    diff: FileDiff | None = None


class Codebase(Protocol):
    """The repository at the pull request's head (the base archive overlaid with the changed files)."""

    head_sha: str

    def related(self, path: str, start: int, end: int, *, budget_tokens: int) -> tuple[list[Snippet], int]:
        """Cross-file code that code at path:start-end depends on or is used by: callers of the functions/classes
        defined there (each call site with its enclosing scope), definitions (signature, docstring, short body) of
        what it calls in other files, the interfaces/base classes it implements. Ranked nearest first, deduplicated,
        within the budget; the int is how many snippets were left out."""
        ...

    def search_code(self, pattern: str, *, regex: bool = False, path_glob: str | None = None, limit: int = 50) -> str:
        """Lines matching ``pattern`` (literal, or a regular expression run with a timeout), as bounded text that says
        how many matches were not shown."""
        ...

    def find_definition(self, name: str, *, limit: int = 10, bodies: int = 0) -> str:
        """Where ``name`` (a function, method, class, type) is defined, each with its signature, and the code of the
        first ``bodies`` definitions that have a body; bounded text."""
        ...

    def find_references(self, name: str, *, limit: int = 50) -> str:
        """Where ``name`` is called or used as a base type, each line with its enclosing scope's name; bounded text."""
        ...

    def read_file(self, path: str, start: int = 1, end: int | None = None) -> str | None:
        """Lines ``start``..``end`` of a text file at the head, numbered, under a first line "path: lines A-B of N";
        None when there is no such file."""
        ...

    def list_directory(self, path: str) -> list[str]:
        """A directory's entries at the head (directories end with '/'); empty when there is no such directory."""
        ...


async def open_codebase(
    source: ArchiveSource,
    settings: CodebaseSettings,
    *,
    installation_id: int,
    repo: str,
    base_ref: str,
    base_sha: str,
    head_sha: str,
    changed: Mapping[str, ChangedText],
) -> Codebase | None:
    """The repository at ``head_sha``: the base branch's archive (cached per repository, refreshed when ``base_sha``
    moved on too far) overlaid with ``changed`` (the changed files' head text the review already read). None when
    disabled, too big, or the archive cannot be had: the review goes on without it."""
    from reviewer_app.codebase.snapshot import open_snapshot

    if not settings.enabled:
        return None
    return await open_snapshot(
        source,
        settings,
        installation_id=installation_id,
        repo=repo,
        base_ref=base_ref,
        base_sha=base_sha,
        head_sha=head_sha,
        changed=changed,
    )


from reviewer_app.codebase.settings import CodebaseSettings  # noqa: E402  (the settings refer to nothing above)

__all__ = ["ArchiveSource", "ChangedText", "Codebase", "CodebaseSettings", "Snippet", "open_codebase"]
