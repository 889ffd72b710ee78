"""The client's copies of GitHub answers it may ask for again with ``If-None-Match``: a GitHub ``304 Not Modified``
costs no rate limit, and the copy stands in for the body GitHub did not send.

gidgethub keeps them through its ``cache=`` argument (a mapping of URL to ETag, Last-Modified, decoded body and
next-page link). This mapping bounds them by the size of their bodies (least recently used first out) and hands
out a fresh copy on every hit, so no caller can change what a later 304 stands for.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, MutableMapping
from typing import Any

import cachetools

CACHE_BYTES = 16 * 1024 * 1024
_OVERHEAD = 256  # the URL, the ETag and the tuple, roughly

Entry = tuple[str | None, str | None, Any, str | None]  # gidgethub's: etag, last-modified, data, next page


class EtagCache(MutableMapping[str, Entry]):
    """Answers kept by URL for conditional requests, at most ``max_bytes`` of JSON in all."""

    def __init__(self, max_bytes: int = CACHE_BYTES) -> None:
        self._entries: cachetools.LRUCache[str, tuple[str | None, str | None, bytes, str | None]] = cachetools.LRUCache(
            maxsize=max_bytes, getsizeof=lambda entry: len(entry[2]) + _OVERHEAD
        )

    def __getitem__(self, url: str) -> Entry:
        etag, modified, body, more = self._entries[url]
        return etag, modified, json.loads(body), more

    def __setitem__(self, url: str, entry: Entry) -> None:
        etag, modified, data, more = entry
        body = json.dumps(data, separators=(",", ":")).encode()
        if len(body) + _OVERHEAD > self._entries.maxsize:
            self._entries.pop(url, None)  # too big to keep: asked in full next time
            return
        self._entries[url] = (etag, modified, body, more)

    def __delitem__(self, url: str) -> None:
        del self._entries[url]

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def size(self) -> int:
        return int(self._entries.currsize)
