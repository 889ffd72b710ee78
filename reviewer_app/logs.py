"""Logging set-up: one line per event, text or JSON, carrying job, PR and delivery context; third-party libraries
heard only from WARNING up unless asked for by name, and every line redacted of the secrets before it is written."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterable, Mapping
from contextvars import ContextVar
from typing import TYPE_CHECKING, TextIO

from reviewer_app.redaction import Redactor

if TYPE_CHECKING:
    from reviewer_app.settings.config import Config

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
            out["exc"] = record.exc_text or self.formatException(record.exc_info)
        return json.dumps(out, default=str)


class TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        ctx = " ".join(f"{n}={getattr(record, n)}" for n in CONTEXT_FIELDS if hasattr(record, n))
        return f"{line} [{ctx}]" if ctx else line


# Our own loggers: the rest (the SDKs, botocore, google-auth, urllib3, httpx, asyncio, ...) are third parties, whose
# DEBUG lines carry whole requests: headers, signatures, prompts.
OURS = ("reviewer_app", "__main__")
# Third parties known to be chatty below WARNING, quieted at the source too (their records are never even made).
QUIET = (
    "aiohttp",
    "aiosqlite",
    "anthropic",
    "asyncio",
    "asyncpg",
    "boto3",
    "botocore",
    "gidgethub",
    "google",
    "google.auth",
    "hpack",
    "httpcore",
    "httpcore2",
    "httpx",
    "httpx2",
    "s3transfer",
    "urllib3",
)
# Environment credentials the SDKs read themselves (no setting of ours holds them), masked in the log all the same.
ENV_SECRETS = (
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_BEARER_TOKEN_BEDROCK",
    "GITHUB_TOKEN",
    "GH_TOKEN",
    "GH_ENTERPRISE_TOKEN",
    "ANTHROPIC_AUTH_TOKEN",
)


def _under(name: str, prefixes: Iterable[str]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


class ThirdPartyFilter(logging.Filter):
    """Below WARNING, only our own records pass, and those of the loggers asked for by name (REVIEWER_DEBUG_LOGGERS)."""

    def __init__(self, asked: Iterable[str] = ()) -> None:
        super().__init__()
        self.heard = (*OURS, *asked)

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.WARNING or _under(record.name, self.heard)


class RedactFilter(logging.Filter):
    """Every record's message, traceback and stack made free of the secrets (redaction.Redactor) before any formatter
    sees them: the same mask for text and JSON lines, and for whatever a library logs."""

    def __init__(self, redact: Redactor) -> None:
        super().__init__()
        self.redact = redact

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg, record.args = self.redact(record.getMessage()), None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self.redact(record.exc_text)
        if record.stack_info:
            record.stack_info = self.redact(record.stack_info)
        return True


def configured_secrets(cfg: Config, env: Mapping[str, str]) -> list[str]:
    """What the log must never show: every secret setting (the webhook secret, the API key, the private key, the
    tokens), each value of ANTHROPIC_CUSTOM_HEADERS, and the credentials the SDKs read from the environment."""
    from reviewer_app.core.providers import HeaderError, parse_headers
    from reviewer_app.settings.table import SETTINGS

    found = [str(getattr(cfg, s.attr)) for s in SETTINGS if s.secret]
    try:
        found += parse_headers(cfg.model_headers, "ANTHROPIC_CUSTOM_HEADERS").values()
    except HeaderError:  # refused at start anyway; the whole text is masked meanwhile
        pass
    found += [env[name] for name in ENV_SECRETS if env.get(name)]
    return [s for s in found if s]


def setup_logging(
    level: str, fmt: str, stream: TextIO | None = None, *, secrets: Iterable[str] = (), debug_loggers: str = ""
) -> None:
    """One handler on the root logger at ``level``; third parties below WARNING only when named in ``debug_loggers``
    (comma-separated, REVIEWER_DEBUG_LOGGERS), and ``secrets`` masked on every line."""
    asked = tuple(name.strip() for name in debug_loggers.split(",") if name.strip())
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.addFilter(ContextFilter())
    handler.addFilter(ThirdPartyFilter(asked))
    handler.addFilter(RedactFilter(Redactor(secrets)))
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(TextFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for name in QUIET:
        logging.getLogger(name).setLevel(logging.NOTSET if _under(name, asked) else logging.WARNING)
    for name in asked:  # below a quieted parent ("google.auth" under "google") it needs its own level
        logging.getLogger(name).setLevel(level.upper())
