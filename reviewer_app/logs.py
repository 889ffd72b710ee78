"""Logging set-up: one line per event, text or JSON, carrying job, PR and delivery context."""

from __future__ import annotations

import json
import logging
import sys
from contextvars import ContextVar
from typing import TextIO

CONTEXT_FIELDS = ("delivery", "event", "action", "job_id", "repo", "pr", "head_sha", "attempt")

# Fields every line logged inside a job's task carries (tasks copy the context they were created in, so the
# runner and everything it calls inherit the job's fields without passing them along).
_context: ContextVar[dict[str, object] | None] = ContextVar("reviewer_log_context", default=None)


def bind_log_context(**fields: object) -> None:
    """Add ``fields`` to every line the current task logs from now on, and the tasks it creates after this.

    Each asyncio task runs in its own copy of the context, so binding in a job's task touches no other job.
    """
    _context.set({**(_context.get() or {}), **{k: v for k, v in fields.items() if v is not None}})


class ContextFilter(logging.Filter):
    """Copies the current log context onto each record, without overriding an explicit ``extra=``."""

    def filter(self, record: logging.LogRecord) -> bool:
        for name, value in (_context.get() or {}).items():
            if not hasattr(record, name):
                setattr(record, name, value)
        return True


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out = {
            "ts": round(record.created, 3),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for name in CONTEXT_FIELDS:
            if hasattr(record, name):
                out[name] = getattr(record, name)
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


class TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        ctx = " ".join(f"{n}={getattr(record, n)}" for n in CONTEXT_FIELDS if hasattr(record, n))
        return f"{line} [{ctx}]" if ctx else line


def setup_logging(level: str, fmt: str, stream: TextIO | None = None) -> None:
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.addFilter(ContextFilter())
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(TextFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
    # The SDKs log whole requests (prompts, headers) and aiosqlite every statement with its parameters (review
    # text, lease tokens) at DEBUG: keep them quiet whatever LOG_LEVEL says.
    for noisy in ("anthropic", "httpx", "httpx2", "httpcore", "httpcore2", "aiosqlite"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
