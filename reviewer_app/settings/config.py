"""Every setting of reviewer-app, read once at start from the environment and validated with one-line errors."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from urllib.parse import urlparse

from reviewer_app.core.experiments import operator_experiment
from reviewer_app.core.pricing import Price, PriceError, parse_prices
from reviewer_app.core.providers import ANTHROPIC, PROVIDERS, VERTEX, HeaderError, Provider, parse_headers
from reviewer_app.redaction import redact_url
from reviewer_app.settings.table import KNOWN_ENV, SETTINGS, Setting


class ConfigError(ValueError):
    """A setting is missing or wrong; the message is one line that says what to fix."""


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
    model_provider: str = ANTHROPIC
    model_headers: str = field(default="", repr=False)
    aws_region: str = ""
    bedrock_base_url: str = ""
    vertex_region: str = ""
    vertex_project_id: str = ""
    vertex_base_url: str = ""
    model: str = ""  # "": the provider's default (__post_init__)
    max_input_tokens: int = 60000
    max_output_tokens: int = 4096
    max_parts: int = 3
    model_timeout_seconds: float = 300.0
    malformed_retries: int = 2
    context_lines: int = 150
    repository_tools: bool = False
    dry_run: bool = False
    verify: bool = True
    signal_reads: int = 20
    signal_pass_seconds: float = 3600.0
    verify_model: str = ""  # "": the provider's default
    max_tool_turns: int = 3
    max_tool_bytes: int = 20000
    concurrency: int = 4
    answer_concurrency: int = 2
    housekeeping_concurrency: int = 3
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
    learnings_per_repo: int = 100
    learnings_prompt_tokens: int = 1500
    learning_max_chars: int = 300
    metrics_token: str = field(default="", repr=False)
    dashboard_token: str = field(default="", repr=False)
    secure_cookies: str = "auto"
    http_header_timeout_seconds: float = 10.0
    http_body_timeout_seconds: float = 60.0
    http_keepalive_seconds: float = 15.0
    http_max_connections: int = 1000
    prices: str = ""
    experiment: str = ""
    retention_days: float = 30.0
    recovery_seconds: float = 600.0
    delivery_window_days: float = 3.0
    sweep_seconds: float = 3600.0
    batch: bool = True
    batch_after_seconds: float = 0.0
    batch_poll_seconds: float = 60.0
    batch_gather_seconds: float = 2.0
    codebase: bool = True
    codebase_dir: str = ""
    codebase_cache_mb: int = 4096
    codebase_refresh_seconds: float = 86400.0
    codebase_refresh_commits: int = 50
    codebase_max_files: int = 60000
    codebase_max_archive_mb: int = 200
    codebase_context_tokens: int = 6000
    codebase_tool_calls: int = 24
    codebase_tool_bytes: int = 120000
    log_level: str = "INFO"
    log_format: str = "text"
    debug_loggers: str = ""

    def __post_init__(self) -> None:
        provider = PROVIDERS.get(self.model_provider, PROVIDERS[ANTHROPIC])  # an unknown name is a problem() below
        if not self.model:
            object.__setattr__(self, "model", provider.model)
        if not self.verify_model:
            object.__setattr__(self, "verify_model", provider.verify_model)

    @property
    def provider(self) -> Provider:
        return PROVIDERS[self.model_provider]

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
        """The effective configuration, secrets masked, for `reviewer-app config`. A key read from
        GITHUB_PRIVATE_KEY_PATH shows there, not as a GITHUB_PRIVATE_KEY that was never set."""
        out = {}
        for s in SETTINGS:
            value = getattr(self, s.attr)
            if s.attr == "private_key" and self.private_key_path:
                value = ""
            out[s.env] = ("***" if value else "") if s.secret else redact_url(str(value))
        return out


@dataclass(frozen=True)
class Missing:
    """A setting reviews cannot run without: which, and what it is, for a person."""

    env: str
    what: str


def missing_for_reviews(cfg: Config) -> tuple[Missing, ...]:
    """What keeps this configuration from running reviews (the review runner without its App or model key)."""
    if cfg.runner != "review":
        return ()
    missing = []
    if not cfg.github_configured:
        missing.append(Missing("GITHUB_APP_ID", "no GitHub App is configured (GITHUB_APP_ID and its private key)"))
    model = model_missing(cfg)
    if model is not None:
        missing.append(model)
    return tuple(missing)


def model_missing(cfg: Config) -> Missing | None:
    """The setting the model provider cannot be reached without, where the configuration can tell: the Claude API's
    key, Vertex AI's region. AWS and Google credentials come from their own chains (profiles, roles, Application
    Default Credentials), found when the client is built."""
    if cfg.model_provider == ANTHROPIC and not cfg.anthropic_api_key:
        return Missing("ANTHROPIC_API_KEY", "ANTHROPIC_API_KEY (the model key) is not set")
    if cfg.model_provider == VERTEX and not cfg.vertex_region:
        return Missing("CLOUD_ML_REGION", "CLOUD_ML_REGION (the Vertex AI region of Claude) is not set")
    return None


def why_no_reviews(cfg: Config) -> str | None:
    """One line naming what reviews wait for, or None when they can run."""
    missing = missing_for_reviews(cfg)
    return " and ".join(m.what for m in missing) if missing else None


def sqlite_path(url: str) -> str | None:
    if url.startswith("sqlite:///"):
        return url[len("sqlite:///") :]
    return None


_KIND_NAMES = {int: "a whole number", float: "a number"}


def parse_setting(setting: Setting, raw: str) -> object:
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
            raise ConfigError(f"{setting.env}={raw!r} is not {_KIND_NAMES[setting.kind]}") from None
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
    unknown = unknown_settings(env)
    if unknown:
        raise ConfigError(unknown[0])
    values: dict[str, object] = {}
    for s in SETTINGS:
        if s.env in env and env[s.env] != "":
            values[s.attr] = parse_setting(s, env[s.env])
    values.update({k: v for k, v in overrides.items() if v is not None})
    known = {f.name for f in fields(Config)}
    cfg = Config(**{k: v for k, v in values.items() if k in known})
    return _validate(cfg, require_webhook_secret=require_webhook_secret and not (allow_setup and cfg.needs_setup))


def unknown_settings(env: Mapping[str, str]) -> list[str]:
    """A one-line message for each ``REVIEWER_`` variable that is no setting (a typo would leave a default)."""
    messages = []
    for name in env:
        if name.startswith("REVIEWER_") and name not in KNOWN_ENV and not name.startswith("REVIEWER_TEST_"):
            # The closest name: REVIEWER_CONCURENCY is REVIEWER_CONCURRENCY, not REVIEWER_ANSWER_CONCURRENCY.
            close = sorted((k for k in KNOWN_ENV if k.startswith("REVIEWER_")), key=lambda k: -_similarity(k, name))
            hint = f" (did you mean {close[0]}?)" if close and _similarity(close[0], name) > 0.8 else ""
            messages.append(f"unknown setting {name}{hint}; see docs/configuration.md")
    return messages


# Names under these prefixes belong to others too (GitHub Actions sets a score of GITHUB_ names, the Anthropic SDK reads
# its own): only one that looks like a setting of ours is worth a word, since a typo there leaves a setting unset.
FOREIGN_PREFIXES = ("GITHUB_", "ANTHROPIC_")
# GITHUB_TOKEN is read by `reviewer-app review`; the rest are GitHub Actions' default variables, set in every job.
NOT_OURS = frozenset(
    "GITHUB_TOKEN GITHUB_ACTION GITHUB_ACTION_PATH GITHUB_ACTION_REPOSITORY GITHUB_ACTIONS GITHUB_ACTOR GITHUB_ACTOR_ID "
    "GITHUB_BASE_REF GITHUB_ENV GITHUB_EVENT_NAME GITHUB_EVENT_PATH GITHUB_GRAPHQL_URL GITHUB_HEAD_REF GITHUB_JOB "
    "GITHUB_OUTPUT GITHUB_PATH GITHUB_REF GITHUB_REF_NAME GITHUB_REF_PROTECTED GITHUB_REF_TYPE GITHUB_REPOSITORY "
    "GITHUB_REPOSITORY_ID GITHUB_REPOSITORY_OWNER GITHUB_REPOSITORY_OWNER_ID GITHUB_RETENTION_DAYS GITHUB_RUN_ATTEMPT "
    "GITHUB_RUN_ID GITHUB_RUN_NUMBER GITHUB_SERVER_URL GITHUB_SHA GITHUB_STATE GITHUB_STEP_SUMMARY "
    "GITHUB_TRIGGERING_ACTOR GITHUB_WORKFLOW GITHUB_WORKFLOW_REF GITHUB_WORKFLOW_SHA GITHUB_WORKSPACE".split()
)


def lookalike_settings(env: Mapping[str, str]) -> list[str]:
    """A one-line warning for each GITHUB_ or ANTHROPIC_ name that is none of ours but looks like one (GITHUB_APPID):
    at most two edits away, the same but for underscores, or a part of one's words (ANTHROPIC_KEY)."""
    known = sorted(k for k in KNOWN_ENV if k.startswith(FOREIGN_PREFIXES))
    warnings = []
    for name in sorted(env):
        if not name.startswith(FOREIGN_PREFIXES) or name in KNOWN_ENV or name in NOT_OURS:
            continue
        like = [k for k in known if k.split("_", 1)[0] == name.split("_", 1)[0] and _looks_like(name, k)]
        if like:
            best = min(like, key=lambda k: _edits(name, k))
            warnings.append(f"{name} is no setting of reviewer-app and is ignored: did you mean {best}?")
    return warnings


def _looks_like(name: str, known: str) -> bool:
    if name.replace("_", "") == known.replace("_", "") or _edits(name, known) <= 2:
        return True
    words, known_words = name.split("_")[1:], set(known.split("_")[1:])
    return bool(words) and set(words) <= known_words


def _edits(a: str, b: str) -> int:
    """Levenshtein distance."""
    row = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        prev, row[0] = row[0], i
        for j, cb in enumerate(b, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (ca != cb))
    return row[-1]


def _similarity(a: str, b: str) -> float:
    import difflib

    return difflib.SequenceMatcher(None, a, b).ratio()


def _validate(cfg: Config, *, require_webhook_secret: bool = True) -> Config:
    found = problems(cfg, require_webhook_secret=require_webhook_secret)
    if found:
        raise ConfigError(found[0])
    return with_private_key(cfg)


def problems(cfg: Config, *, require_webhook_secret: bool = True) -> list[str]:
    """Every problem between settings that stops the app, each one line, in the order `serve` reports the first."""
    found = []
    url = cfg.database_url
    shown = redact_url(url)  # every message below may reach a terminal or a log
    if not (url.startswith("sqlite:///") or url.startswith(("postgresql://", "postgres://"))):
        found.append(f"DATABASE_URL={shown!r} is not supported: use sqlite:///path/to/file.db or postgresql://...")
    if url.startswith("sqlite:///") and not sqlite_path(url):
        found.append("DATABASE_URL names no file: use sqlite:///reviewer.db")
    if url.startswith(("postgresql://", "postgres://")) and not _hostname(url) and "host=" not in url:
        found.append(f"DATABASE_URL={shown!r} names no host")
    if cfg.model_provider not in PROVIDERS:
        found.append(f"REVIEWER_MODEL_PROVIDER={cfg.model_provider!r} is not one of: {', '.join(PROVIDERS)}")
    try:
        parse_headers(cfg.model_headers, "ANTHROPIC_CUSTOM_HEADERS")
    except HeaderError as exc:
        found.append(str(exc))
    if cfg.runner not in ("review", "noop"):
        found.append(f"REVIEWER_RUNNER={cfg.runner!r} is not one of: review, noop")
    if cfg.log_format not in ("text", "json"):
        found.append(f"LOG_FORMAT={cfg.log_format!r} is not one of: text, json")
    if cfg.log_level.upper() not in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"):
        found.append(f"LOG_LEVEL={cfg.log_level!r} is not a log level")
    if cfg.retry_max_seconds < cfg.retry_base_seconds:
        found.append("REVIEWER_RETRY_MAX_SECONDS is below REVIEWER_RETRY_BASE_SECONDS")
    if 0 < cfg.retention_days < 3:
        # GitHub redelivers deliveries up to 3 days old; one pruned before that would be reviewed again.
        found.append("REVIEWER_RETENTION_DAYS must be 0 (keep everything) or at least 3")
    if cfg.recovery_seconds and 0 < cfg.retention_days < cfg.delivery_window_days:
        # Recovery would find a failed delivery whose admission record was pruned, and ask for it again.
        found.append(
            f"REVIEWER_DELIVERY_WINDOW_DAYS={cfg.delivery_window_days:g} is longer than "
            f"REVIEWER_RETENTION_DAYS={cfg.retention_days:g}: raise the retention or shorten the window"
        )
    if cfg.secure_cookies not in ("auto", "on", "off"):
        found.append(f"REVIEWER_SECURE_COOKIES must be on, off or auto, got {cfg.secure_cookies!r}")
    if cfg.dashboard_token and len(cfg.dashboard_token) < 16:
        found.append("REVIEWER_DASHBOARD_TOKEN is shorter than 16 characters: use a long random token")
    try:
        parse_prices(cfg.prices)
    except PriceError as exc:
        found.append(str(exc))
    found.extend(operator_experiment(cfg.experiment)[1])
    if cfg.renew_seconds and cfg.renew_seconds >= cfg.lease_seconds:
        found.append("REVIEWER_RENEW_SECONDS must be shorter than REVIEWER_LEASE_SECONDS")
    if require_webhook_secret and not cfg.webhook_secret and not cfg.insecure_no_signature:
        found.append(
            "GITHUB_WEBHOOK_SECRET is not set: set it to the App's webhook secret"
            " (or REVIEWER_INSECURE_NO_SIGNATURE=1 for local development only)"
        )
    if cfg.private_key and cfg.private_key_path:
        found.append("set GITHUB_PRIVATE_KEY or GITHUB_PRIVATE_KEY_PATH, not both")
    has_key = bool(cfg.private_key or cfg.private_key_path)
    if cfg.app_id and not has_key:
        found.append("GITHUB_APP_ID is set but no private key: set GITHUB_PRIVATE_KEY_PATH or GITHUB_PRIVATE_KEY")
    if has_key and not cfg.app_id:
        found.append("a private key is set but GITHUB_APP_ID is not: set the App's id")
    if cfg.app_id and not cfg.app_id.isdigit():
        found.append(f"GITHUB_APP_ID={cfg.app_id!r} is not a number")
    return found


def with_private_key(cfg: Config) -> Config:
    """``cfg`` with the App's key read from GITHUB_PRIVATE_KEY_PATH and checked; ConfigError names where it came
    from and what is wrong with it, never its content."""
    source = "GITHUB_PRIVATE_KEY"
    if cfg.private_key_path and not cfg.private_key:
        shown = cfg.private_key_path
        path = Path(shown)
        if path.is_dir():
            raise ConfigError(f"GITHUB_PRIVATE_KEY_PATH={shown!r} is a directory: name the key file (.pem) in it")
        if not path.exists():
            raise ConfigError(f"GITHUB_PRIVATE_KEY_PATH={shown!r}: no such file")
        try:
            text = path.read_text()
        except (OSError, UnicodeDecodeError) as exc:
            why = exc.strerror if isinstance(exc, OSError) else "not a text file"
            raise ConfigError(f"GITHUB_PRIVATE_KEY_PATH={shown!r}: cannot read the key file ({why})") from None
        cfg = _replace(cfg, private_key=text)
        source = f"GITHUB_PRIVATE_KEY_PATH={shown!r}"
    if cfg.private_key and "\n" not in cfg.private_key and "\\n" in cfg.private_key:
        # A PEM passed through one-line channels (docker -e, CI secrets) often carries "\n" as two characters.
        cfg = _replace(cfg, private_key=cfg.private_key.replace("\\n", "\n"))
    if cfg.private_key:
        _check_key(cfg.private_key, source)
    return cfg


def _hostname(url: str) -> str | None:
    try:
        return urlparse(url).hostname
    except ValueError:  # an unbalanced "[" (an IPv6 host): the message must not quote the URL unmasked either
        return None


def _replace(cfg: Config, **changes: object) -> Config:
    from dataclasses import replace

    return replace(cfg, **changes)


def _check_key(pem: str, source: str) -> None:
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    try:
        load_pem_private_key(pem.encode(), password=None)
    except TypeError:  # the key has a passphrase
        raise ConfigError(
            f"{source}: the GitHub App private key is encrypted: give the key GitHub generated, without a passphrase"
        ) from None
    except ValueError:
        raise ConfigError(
            f"{source}: not a valid GitHub App private key: use the .pem file GitHub generated for the App, unchanged"
        ) from None


def cookies_secure(cfg: Config) -> bool:
    """Whether the dashboard's cookie is always Secure: REVIEWER_SECURE_COOKIES, and for ``auto`` whether the app
    listens beyond loopback (where a browser reaches it through TLS, a proxy's or its own)."""
    if cfg.secure_cookies != "auto":
        return cfg.secure_cookies == "on"
    return cfg.host not in ("127.0.0.1", "::1", "localhost")
