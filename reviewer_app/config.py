"""Every setting of reviewer-app, read once at start from the environment and validated with one-line errors."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from urllib.parse import urlparse

from reviewer_app.core.pricing import Price, PriceError, parse_prices
from reviewer_app.redaction import redact_url


class ConfigError(ValueError):
    """A setting is missing or wrong; the message is one line that says what to fix."""


@dataclass(frozen=True)
class Setting:
    env: str
    attr: str
    kind: type
    default: object
    help: str
    secret: bool = False
    minimum: float | None = None
    maximum: float | None = None


SETTINGS: tuple[Setting, ...] = (
    Setting("HOST", "host", str, "0.0.0.0", "address the HTTP server binds"),
    Setting("PORT", "port", int, 8080, "port the HTTP server binds", minimum=0, maximum=65535),
    Setting("DATABASE_URL", "database_url", str, "sqlite:///reviewer.db", "sqlite:///path or postgresql://..."),
    Setting("GITHUB_WEBHOOK_SECRET", "webhook_secret", str, "", "secret GitHub signs webhooks with", secret=True),
    Setting("GITHUB_APP_ID", "app_id", str, "", "the GitHub App's id"),
    Setting("GITHUB_PRIVATE_KEY", "private_key", str, "", "the App's private key as PEM text", secret=True),
    Setting("GITHUB_PRIVATE_KEY_PATH", "private_key_path", str, "", "file holding the App's private key (PEM)"),
    Setting(
        "GITHUB_API_URL",
        "github_api_url",
        str,
        "https://api.github.com",
        "REST API base URL (GHES: https://HOST/api/v3)",
    ),
    Setting(
        "GITHUB_URL",
        "github_url",
        str,
        "https://github.com",
        "GitHub web URL the setup page registers the App on (GHES: https://HOST)",
    ),
    Setting(
        "REVIEWER_ENV_FILE",
        "env_file",
        str,
        ".env",
        "file read into the environment at start; the setup page saves the App's credentials there",
    ),
    Setting("ANTHROPIC_API_KEY", "anthropic_api_key", str, "", "Claude API key", secret=True),
    Setting("ANTHROPIC_BASE_URL", "anthropic_base_url", str, "", "Messages API base URL (read by the SDK too)"),
    Setting("REVIEWER_MODEL", "model", str, "claude-sonnet-4-5", "Claude model that writes the reviews"),
    Setting(
        "REVIEWER_MAX_INPUT_TOKENS", "max_input_tokens", int, 60000, "token budget of one model request", minimum=2000
    ),
    Setting(
        "REVIEWER_MAX_OUTPUT_TOKENS", "max_output_tokens", int, 4096, "max tokens of the model's answer", minimum=256
    ),
    Setting(
        "REVIEWER_MAX_PARTS",
        "max_parts",
        int,
        3,
        "model requests one review may use for a large PR",
        minimum=1,
        maximum=20,
    ),
    Setting(
        "REVIEWER_MODEL_TIMEOUT_SECONDS",
        "model_timeout_seconds",
        float,
        300.0,
        "timeout of one model request",
        minimum=1,
    ),
    Setting(
        "REVIEWER_MALFORMED_RETRIES",
        "malformed_retries",
        int,
        2,
        "re-asks after a malformed model answer",
        minimum=0,
        maximum=5,
    ),
    Setting(
        "REVIEWER_REPOSITORY_TOOLS",
        "repository_tools",
        bool,
        False,
        "let the model read the repository (read-only, at the head commit) before it submits, for repositories whose .github/reviewer.yml does not say",
    ),
    Setting(
        "REVIEWER_MAX_TOOL_TURNS",
        "max_tool_turns",
        int,
        3,
        "turns of repository tool calls one review request may use (0: tools off everywhere)",
        minimum=0,
        maximum=10,
    ),
    Setting(
        "REVIEWER_MAX_TOOL_BYTES",
        "max_tool_bytes",
        int,
        20000,
        "bytes of repository tool output per turn",
        minimum=1000,
        maximum=200000,
    ),
    Setting(
        "REVIEWER_CONTEXT_LINES",
        "context_lines",
        int,
        150,
        "unchanged lines around the changes of one file shown to the model, read at the head commit (0: none)",
        minimum=0,
        maximum=2000,
    ),
    Setting(
        "REVIEWER_CONCURRENCY", "concurrency", int, 4, "worker slots: reviews running at once", minimum=1, maximum=256
    ),
    Setting(
        "REVIEWER_MAX_ATTEMPTS", "max_attempts", int, 5, "attempts before a job ends failed", minimum=1, maximum=100
    ),
    Setting(
        "REVIEWER_LEASE_SECONDS",
        "lease_seconds",
        float,
        120.0,
        "lease length; an expired lease is rescued",
        minimum=0.2,
    ),
    Setting(
        "REVIEWER_RENEW_SECONDS", "renew_seconds", float, 0.0, "renewal interval (0: a third of the lease)", minimum=0
    ),
    Setting(
        "REVIEWER_RETRY_BASE_SECONDS",
        "retry_base_seconds",
        float,
        10.0,
        "first retry delay (doubles each time)",
        minimum=0,
    ),
    Setting("REVIEWER_RETRY_MAX_SECONDS", "retry_max_seconds", float, 600.0, "cap of the retry delay", minimum=0),
    Setting(
        "REVIEWER_SCAN_SECONDS",
        "scan_seconds",
        float,
        5.0,
        "interval of scans for due retries and expired leases",
        minimum=0.05,
    ),
    Setting(
        "REVIEWER_SHUTDOWN_GRACE_SECONDS",
        "shutdown_grace_seconds",
        float,
        20.0,
        "time in-flight jobs get on SIGTERM",
        minimum=0,
    ),
    Setting(
        "REVIEWER_JOB_TIMEOUT_SECONDS",
        "job_timeout_seconds",
        float,
        900.0,
        "a review running longer is stopped and retried",
        minimum=0.1,
    ),
    Setting(
        "REVIEWER_MAX_BODY_BYTES",
        "max_body_bytes",
        int,
        25 * 1024 * 1024,
        "largest webhook body accepted",
        minimum=1024,
    ),
    Setting(
        "REVIEWER_DB_BUSY_TIMEOUT_MS",
        "db_busy_timeout_ms",
        int,
        5000,
        "how long a write waits for a locked database",
        minimum=1,
    ),
    Setting(
        "REVIEWER_DB_POOL_SIZE",
        "db_pool_size",
        int,
        10,
        "PostgreSQL: connections per process for queries (plus one for LISTEN)",
        minimum=1,
        maximum=1000,
    ),
    Setting(
        "REVIEWER_RUNNER",
        "runner",
        str,
        "review",
        "what a job does: review (default) or noop (smoke tests, benchmarks)",
    ),
    Setting("REVIEWER_NOOP_SECONDS", "noop_seconds", float, 0.0, "how long the noop runner works", minimum=0),
    Setting(
        "REVIEWER_INSECURE_NO_SIGNATURE",
        "insecure_no_signature",
        bool,
        False,
        "DEVELOPMENT ONLY: accept unsigned webhooks",
    ),
    Setting(
        "REVIEWER_GITHUB_RETRY_SECONDS",
        "github_retry_seconds",
        float,
        0.3,
        "backoff of in-place retries of GitHub reads",
        minimum=0,
    ),
    Setting(
        "REVIEWER_GITHUB_WRITE_INTERVAL_SECONDS",
        "github_write_interval_seconds",
        float,
        1.0,
        "an installation's writes to GitHub go out at least this far apart once a burst is spent (0: not paced)",
        minimum=0,
    ),
    Setting(
        "REVIEWER_GITHUB_WRITE_BURST",
        "github_write_burst",
        int,
        3,
        "writes of one installation that may go out back to back before the interval applies",
        minimum=1,
        maximum=100,
    ),
    Setting(
        "REVIEWER_CHECK_SYNC_SECONDS",
        "check_sync_seconds",
        float,
        2.0,
        "interval of the check-run sync pass",
        minimum=0.05,
    ),
    Setting(
        "REVIEWER_DEBOUNCE_SECONDS",
        "debounce_seconds",
        float,
        30.0,
        "automatic reviews wait this long after a push; a newer push in the window replaces the waiting one",
        minimum=0,
    ),
    Setting(
        "REVIEWER_MAX_REVIEWS_PER_DAY",
        "max_reviews_per_day",
        int,
        500,
        "reviews per installation per day (0: no limit)",
        minimum=0,
    ),
    Setting(
        "REVIEWER_MAX_AUTO_PER_AUTHOR_DAY",
        "max_auto_per_author_day",
        int,
        20,
        "automatic reviews per day of pull requests by one author outside the repository's owner, members and collaborators (0: no limit)",
        minimum=0,
    ),
    Setting(
        "REVIEWER_MAX_MANUAL_PER_PR_HOUR",
        "max_manual_per_pr_hour",
        int,
        10,
        "requested reviews (/review, Re-run) per PR and requester per hour (0: no limit)",
        minimum=0,
    ),
    Setting(
        "REVIEWER_MAX_REPLIES_PER_THREAD_HOUR",
        "max_replies_per_thread_hour",
        int,
        5,
        "answers per review thread (or per PR conversation) per hour (0: no limit)",
        minimum=0,
    ),
    Setting(
        "REVIEWER_MAX_ANSWERS_PER_DAY",
        "max_answers_per_day",
        int,
        200,
        "answers per installation per day, counted apart from reviews so questions never refuse a review (0: no limit)",
        minimum=0,
    ),
    Setting(
        "REVIEWER_MAX_ANSWERS_PER_ASKER_DAY",
        "max_answers_per_asker_day",
        int,
        10,
        "answers per day to one outside asker (a PR's author who is not an owner, member or collaborator; 0: no limit)",
        minimum=0,
    ),
    Setting(
        "REVIEWER_METRICS_TOKEN",
        "metrics_token",
        str,
        "",
        "bearer token GET /metrics requires (empty: no token)",
        secret=True,
    ),
    Setting(
        "REVIEWER_DASHBOARD_TOKEN",
        "dashboard_token",
        str,
        "",
        "token that logs in to the read-only dashboard at /dashboard (empty: no dashboard)",
        secret=True,
    ),
    Setting(
        "REVIEWER_HTTP_HEADER_TIMEOUT_SECONDS",
        "http_header_timeout_seconds",
        float,
        10.0,
        "a connection's request headers must arrive within this long, or it is closed (0: no limit)",
        minimum=0,
    ),
    Setting(
        "REVIEWER_HTTP_BODY_TIMEOUT_SECONDS",
        "http_body_timeout_seconds",
        float,
        60.0,
        "a webhook's body must arrive within this long of its headers, or the answer is 408",
        minimum=1,
    ),
    Setting(
        "REVIEWER_HTTP_KEEPALIVE_SECONDS",
        "http_keepalive_seconds",
        float,
        15.0,
        "an idle keep-alive connection is closed after this long",
        minimum=1,
    ),
    Setting(
        "REVIEWER_HTTP_MAX_CONNECTIONS",
        "http_max_connections",
        int,
        1000,
        "open connections past this many are closed at once",
        minimum=1,
    ),
    Setting(
        "REVIEWER_SECURE_COOKIES",
        "secure_cookies",
        str,
        "auto",
        "the dashboard's session cookie is Secure: on, off, or auto (on unless the app listens on loopback)",
    ),
    Setting(
        "REVIEWER_RETENTION_DAYS",
        "retention_days",
        float,
        30.0,
        "finished jobs and deliveries older than this are pruned (0: keep all)",
        minimum=0,
    ),
    Setting(
        "REVIEWER_RECOVERY_SECONDS",
        "recovery_seconds",
        float,
        600.0,
        "interval of the pass that asks GitHub to redeliver failed webhooks (0: off)",
        minimum=0,
    ),
    Setting(
        "REVIEWER_DELIVERY_WINDOW_DAYS",
        "delivery_window_days",
        float,
        3.0,
        "how far back failed deliveries are looked for: GitHub keeps 3 days (GHES: 7)",
        minimum=0.01,
        maximum=30,
    ),
    Setting(
        "REVIEWER_SWEEP_SECONDS",
        "sweep_seconds",
        float,
        3600.0,
        "interval of the sweep of open pull requests for unreviewed heads (0: off)",
        minimum=0,
    ),
    Setting(
        "REVIEWER_BATCH",
        "batch",
        bool,
        True,
        "send reviews that can wait through Message Batches at half price (the sweep's, repositories with "
        "`batch: true`, jobs waiting past REVIEWER_BATCH_AFTER_SECONDS); 0: every review interactive",
    ),
    Setting(
        "REVIEWER_BATCH_AFTER_SECONDS",
        "batch_after_seconds",
        float,
        0.0,
        "an automatic job that has waited this long for a slot is batched (0: waiting alone never batches)",
        minimum=0,
    ),
    Setting(
        "REVIEWER_BATCH_POLL_SECONDS",
        "batch_poll_seconds",
        float,
        60.0,
        "how often the batch duty asks Anthropic whether the batches it waits on have ended",
        minimum=0.01,
    ),
    Setting(
        "REVIEWER_BATCH_GATHER_SECONDS",
        "batch_gather_seconds",
        float,
        2.0,
        "how long a batched request waits for others to share its batch before it is sent",
        minimum=0,
        maximum=60,
    ),
    Setting(
        "REVIEWER_PRICES",
        "prices",
        str,
        "",
        'model prices for `reviewer-app usage` and the dashboard\'s spend, as JSON: {"model": {"input": 3, "output": 15, '
        '"cache_write": 3.75, "cache_read": 0.3}} in US dollars per million tokens; added to (or replacing) the built-in '
        "table (reviewer_app/core/pricing.py)",
    ),
    Setting("LOG_LEVEL", "log_level", str, "INFO", "DEBUG, INFO, WARNING, ERROR"),
    Setting("LOG_FORMAT", "log_format", str, "text", "text or json"),
)

KNOWN_ENV = frozenset(s.env for s in SETTINGS)


@dataclass(frozen=True)
class Config:
    host: str = "0.0.0.0"
    port: int = 8080
    database_url: str = "sqlite:///reviewer.db"
    webhook_secret: str = field(default="", repr=False)
    app_id: str = ""
    private_key: str = field(default="", repr=False)
    private_key_path: str = ""
    github_api_url: str = "https://api.github.com"
    github_url: str = "https://github.com"
    env_file: str = ".env"
    anthropic_api_key: str = field(default="", repr=False)
    anthropic_base_url: str = ""
    model: str = "claude-sonnet-4-5"
    max_input_tokens: int = 60000
    max_output_tokens: int = 4096
    max_parts: int = 3
    model_timeout_seconds: float = 300.0
    malformed_retries: int = 2
    context_lines: int = 150
    repository_tools: bool = False
    max_tool_turns: int = 3
    max_tool_bytes: int = 20000
    concurrency: int = 4
    max_attempts: int = 5
    lease_seconds: float = 120.0
    renew_seconds: float = 0.0
    retry_base_seconds: float = 10.0
    retry_max_seconds: float = 600.0
    scan_seconds: float = 5.0
    shutdown_grace_seconds: float = 20.0
    job_timeout_seconds: float = 900.0
    max_body_bytes: int = 25 * 1024 * 1024
    db_busy_timeout_ms: int = 5000
    db_pool_size: int = 10
    runner: str = "review"
    noop_seconds: float = 0.0
    insecure_no_signature: bool = False
    github_retry_seconds: float = 0.3
    github_write_interval_seconds: float = 1.0
    github_write_burst: int = 3
    check_sync_seconds: float = 2.0
    debounce_seconds: float = 30.0
    max_reviews_per_day: int = 500
    max_manual_per_pr_hour: int = 10
    max_auto_per_author_day: int = 20
    max_replies_per_thread_hour: int = 5
    max_answers_per_day: int = 200
    max_answers_per_asker_day: int = 10
    metrics_token: str = field(default="", repr=False)
    dashboard_token: str = field(default="", repr=False)
    secure_cookies: str = "auto"
    http_header_timeout_seconds: float = 10.0
    http_body_timeout_seconds: float = 60.0
    http_keepalive_seconds: float = 15.0
    http_max_connections: int = 1000
    prices: str = ""
    retention_days: float = 30.0
    recovery_seconds: float = 600.0
    delivery_window_days: float = 3.0
    sweep_seconds: float = 3600.0
    batch: bool = True
    batch_after_seconds: float = 0.0
    batch_poll_seconds: float = 60.0
    batch_gather_seconds: float = 2.0
    log_level: str = "INFO"
    log_format: str = "text"

    @property
    def price_table(self) -> dict[str, Price]:
        """The built-in prices with REVIEWER_PRICES laid over them (validated at start)."""
        return parse_prices(self.prices)

    @property
    def renew_interval(self) -> float:
        return self.renew_seconds or self.lease_seconds / 3

    @property
    def sqlite_path(self) -> str | None:
        return sqlite_path(self.database_url)

    @property
    def github_configured(self) -> bool:
        return bool(self.app_id)

    @property
    def needs_setup(self) -> bool:
        """No App at all yet (no id, key or secret, and no insecure flag): `serve` shows the setup page."""
        return not (
            self.app_id
            or self.webhook_secret
            or self.private_key
            or self.private_key_path
            or self.insecure_no_signature
        )

    def masked(self) -> dict[str, str]:
        """The effective configuration, secrets masked, for `reviewer-app config`."""
        out = {}
        for s in SETTINGS:
            value = getattr(self, s.attr)
            out[s.env] = ("***" if value else "") if s.secret else redact_url(str(value))
        return out


def sqlite_path(url: str) -> str | None:
    if url.startswith("sqlite:///"):
        return url[len("sqlite:///") :]
    return None


def _parse(setting: Setting, raw: str) -> object:
    raw = raw.strip()
    if setting.kind is bool:
        if raw.lower() in ("1", "true", "yes", "on"):
            return True
        if raw.lower() in ("0", "false", "no", "off", ""):
            return False
        raise ConfigError(f"{setting.env}={raw!r} is not a boolean: use 1 or 0")
    if setting.kind in (int, float):
        try:
            value = setting.kind(raw)
        except ValueError:
            raise ConfigError(f"{setting.env}={raw!r} is not a {setting.kind.__name__}") from None
        if setting.minimum is not None and value < setting.minimum:
            raise ConfigError(f"{setting.env}={raw} is below its minimum {setting.minimum:g}")
        if setting.maximum is not None and value > setting.maximum:
            raise ConfigError(f"{setting.env}={raw} is above its maximum {setting.maximum:g}")
        return value
    return raw


def load_config(
    env: Mapping[str, str] | None = None,
    *,
    require_webhook_secret: bool = True,
    allow_setup: bool = False,
    **overrides: object,
) -> Config:
    """Read and validate the configuration; raises ConfigError with a one-line message.

    Admin commands pass ``require_webhook_secret=False``: they work on the database and never receive a webhook.
    `serve` passes ``allow_setup=True``: with no App at all (``Config.needs_setup``) it starts the setup page
    instead of failing; a partial App (an id without its secret, a key without an id...) still fails.
    """
    env = dict(os.environ if env is None else env)
    for name in env:
        if name.startswith("REVIEWER_") and name not in KNOWN_ENV and not name.startswith("REVIEWER_TEST_"):
            close = [k for k in KNOWN_ENV if k.startswith("REVIEWER_") and _similar(k, name)]
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise ConfigError(f"unknown setting {name}{hint}; see docs/configuration.md")
    values: dict[str, object] = {}
    for s in SETTINGS:
        if s.env in env and env[s.env] != "":
            values[s.attr] = _parse(s, env[s.env])
    values.update({k: v for k, v in overrides.items() if v is not None})
    known = {f.name for f in fields(Config)}
    cfg = Config(**{k: v for k, v in values.items() if k in known})
    return _validate(cfg, require_webhook_secret=require_webhook_secret and not (allow_setup and cfg.needs_setup))


def _similar(a: str, b: str) -> bool:
    import difflib

    return difflib.SequenceMatcher(None, a, b).ratio() > 0.8


def _validate(cfg: Config, *, require_webhook_secret: bool = True) -> Config:
    url = cfg.database_url
    shown = redact_url(url)  # every message below may reach a terminal or a log
    if not (url.startswith("sqlite:///") or url.startswith(("postgresql://", "postgres://"))):
        raise ConfigError(f"DATABASE_URL={shown!r} is not supported: use sqlite:///path/to/file.db or postgresql://...")
    if url.startswith("sqlite:///") and not sqlite_path(url):
        raise ConfigError("DATABASE_URL names no file: use sqlite:///reviewer.db")
    if url.startswith(("postgresql://", "postgres://")) and not _hostname(url) and "host=" not in url:
        raise ConfigError(f"DATABASE_URL={shown!r} names no host")
    if cfg.runner not in ("review", "noop"):
        raise ConfigError(f"REVIEWER_RUNNER={cfg.runner!r} is not one of: review, noop")
    if cfg.log_format not in ("text", "json"):
        raise ConfigError(f"LOG_FORMAT={cfg.log_format!r} is not one of: text, json")
    if cfg.log_level.upper() not in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"):
        raise ConfigError(f"LOG_LEVEL={cfg.log_level!r} is not a log level")
    if cfg.retry_max_seconds < cfg.retry_base_seconds:
        raise ConfigError("REVIEWER_RETRY_MAX_SECONDS is below REVIEWER_RETRY_BASE_SECONDS")
    if 0 < cfg.retention_days < 3:
        # GitHub redelivers deliveries up to 3 days old; one pruned before that would be reviewed again.
        raise ConfigError("REVIEWER_RETENTION_DAYS must be 0 (keep everything) or at least 3")
    if cfg.recovery_seconds and 0 < cfg.retention_days < cfg.delivery_window_days:
        # Recovery would find a failed delivery whose admission record was pruned, and ask for it again.
        raise ConfigError(
            f"REVIEWER_DELIVERY_WINDOW_DAYS={cfg.delivery_window_days:g} is longer than "
            f"REVIEWER_RETENTION_DAYS={cfg.retention_days:g}: raise the retention or shorten the window"
        )
    if cfg.secure_cookies not in ("auto", "on", "off"):
        raise ConfigError(f"REVIEWER_SECURE_COOKIES must be on, off or auto, got {cfg.secure_cookies!r}")
    if cfg.dashboard_token and len(cfg.dashboard_token) < 16:
        raise ConfigError("REVIEWER_DASHBOARD_TOKEN is shorter than 16 characters: use a long random token")
    try:
        parse_prices(cfg.prices)
    except PriceError as exc:
        raise ConfigError(str(exc)) from None
    if cfg.renew_seconds and cfg.renew_seconds >= cfg.lease_seconds:
        raise ConfigError("REVIEWER_RENEW_SECONDS must be shorter than REVIEWER_LEASE_SECONDS")
    if require_webhook_secret and not cfg.webhook_secret and not cfg.insecure_no_signature:
        raise ConfigError(
            "GITHUB_WEBHOOK_SECRET is not set: set it to the App's webhook secret"
            " (or REVIEWER_INSECURE_NO_SIGNATURE=1 for local development only)"
        )
    if cfg.private_key and cfg.private_key_path:
        raise ConfigError("set GITHUB_PRIVATE_KEY or GITHUB_PRIVATE_KEY_PATH, not both")
    has_key = bool(cfg.private_key or cfg.private_key_path)
    if cfg.app_id and not has_key:
        raise ConfigError("GITHUB_APP_ID is set but no private key: set GITHUB_PRIVATE_KEY_PATH or GITHUB_PRIVATE_KEY")
    if has_key and not cfg.app_id:
        raise ConfigError("a private key is set but GITHUB_APP_ID is not: set the App's id")
    if cfg.app_id and not cfg.app_id.isdigit():
        raise ConfigError(f"GITHUB_APP_ID={cfg.app_id!r} is not a number")
    if cfg.private_key_path:
        path = Path(cfg.private_key_path)
        if not path.is_file():
            raise ConfigError(f"GITHUB_PRIVATE_KEY_PATH={cfg.private_key_path!r}: no such file")
        try:
            text = path.read_text()
        except OSError as exc:
            raise ConfigError(f"GITHUB_PRIVATE_KEY_PATH: cannot read the key file ({exc.strerror})") from None
        cfg = _replace(cfg, private_key=text)
    if cfg.private_key and "\n" not in cfg.private_key and "\\n" in cfg.private_key:
        # A PEM passed through one-line channels (docker -e, CI secrets) often carries "\n" as two characters.
        cfg = _replace(cfg, private_key=cfg.private_key.replace("\\n", "\n"))
    if cfg.private_key:
        _check_key(cfg.private_key)
    return cfg


def _hostname(url: str) -> str | None:
    try:
        return urlparse(url).hostname
    except ValueError:  # an unbalanced "[" (an IPv6 host): the message must not quote the URL unmasked either
        return None


def _replace(cfg: Config, **changes: object) -> Config:
    from dataclasses import replace

    return replace(cfg, **changes)


def _check_key(pem: str) -> None:
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    try:
        load_pem_private_key(pem.encode(), password=None)
    except (ValueError, TypeError):
        raise ConfigError("the GitHub App private key is not a valid unencrypted PEM key") from None


def cookies_secure(cfg: Config) -> bool:
    """Whether the dashboard's cookie is always Secure: REVIEWER_SECURE_COOKIES, and for ``auto`` whether the app
    listens beyond loopback (where a browser reaches it through TLS, a proxy's or its own)."""
    if cfg.secure_cookies != "auto":
        return cfg.secure_cookies == "on"
    return cfg.host not in ("127.0.0.1", "::1", "localhost")
