"""Django settings for guidepost: one file, driven by environment variables.

Every variable is read through a helper that fails loudly on a malformed value,
so a typo in a deployment stops the process at start-up instead of running with
a silent default. README.md ("Configuration") lists them; docs/deploy.md sets them
for production.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
from datetime import timedelta
from pathlib import Path
from urllib.parse import parse_qsl, unquote, urlsplit

import django_stubs_ext
from django.core.exceptions import ImproperlyConfigured
from django.utils.csp import CSP

from access_app.agent_keys import AUTH_MODES
from guidepost.installed import INSTALLED, SHIPPED, default_data_dir, flows_copy

# Lets admin classes be written as ModelAdmin[Model] at run time, as the type checker sees them.
django_stubs_ext.monkeypatch()


def env_str(name: str, default: str) -> str:
    return os.environ.get(name, default)


TRUE_WORDS = ("1", "true", "yes", "on")
FALSE_WORDS = ("0", "false", "no", "off")


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in TRUE_WORDS:
        return True
    if value in FALSE_WORDS:
        return False
    raise ImproperlyConfigured(f"{name}={raw!r}: expected one of 1/0, true/false, yes/no, on/off")


def env_int(name: str, default: int, *, minimum: int = 0) -> int:
    raw = os.environ.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r}: expected a whole number") from None
    if value < minimum:
        raise ImproperlyConfigured(f"{name}={raw!r}: must be at least {minimum}")
    return value


def env_days(name: str) -> int | None:
    """A number of days, at least 1; None when the variable is unset or empty."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return None
    return env_int(name, 0, minimum=1)


def env_choice(name: str, default: str, choices: tuple[str, ...]) -> str:
    value = os.environ.get(name, default).strip().lower()
    if value not in choices:
        raise ImproperlyConfigured(f"{name}={value!r}: expected one of {', '.join(choices)}")
    return value


def env_addresses(name: str) -> list[str]:
    """A comma-separated list of IP addresses or networks (``10.0.0.0/8``)."""
    found = []
    for item in os.environ.get(name, "").split(","):
        item = item.strip()
        if not item:
            continue
        try:
            ipaddress.ip_network(item, strict=False)
        except ValueError:
            raise ImproperlyConfigured(
                f"{name}: {item!r} is not an IP address or network (e.g. 127.0.0.1, 10.0.0.0/8)"
            ) from None
        found.append(item)
    return found


def env_float(name: str, default: float, *, minimum: float = 0.0) -> float:
    raw = os.environ.get(name)
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r}: expected a number") from None
    if not value >= minimum or value == float("inf"):
        raise ImproperlyConfigured(f"{name}={raw!r}: must be a number of at least {minimum}")
    return value


def env_path(name: str, default: Path) -> Path:
    return Path(os.environ.get(name) or default).expanduser().resolve()


def env_dir(name: str, default: Path) -> Path:
    path = env_path(name, default)
    if not path.is_dir():
        raise ImproperlyConfigured(f"{name}={str(path)!r}: no such directory")
    return path


def database_from_url(url: str) -> dict[str, object]:
    """Django DATABASES entry for a ``sqlite:///path`` or ``postgres://`` URL.

    >>> database_from_url("postgres://u:p@127.0.0.1:5432/test")["NAME"]
    'test'
    """
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query))
    if parts.scheme == "sqlite":
        name = unquote(parts.path)
        if not name or name == "/":
            raise ImproperlyConfigured(
                f"DATABASE_URL={url!r}: sqlite:///relative/or//absolute/path"
            )
        # sqlite:///var/x.db is relative to INSTANCE_DIR, sqlite:////abs/x.db absolute.
        path = Path(name[1:]) if name.startswith("/") else Path(name)
        if not path.is_absolute():
            path = INSTANCE_DIR / path
        return sqlite_database(path)
    if parts.scheme in ("postgres", "postgresql", "pgsql"):
        if not parts.path.strip("/"):
            raise ImproperlyConfigured(f"DATABASE_URL={url!r}: the database name is missing")
        test_name = query.pop("test_name", None) or f"test_{parts.path.lstrip('/')}"
        # Statements bound by the server and prepared on each connection after their fifth
        # use (psycopg's threshold): a step's statements are planned once per connection,
        # not on every call. ?server_side_binding=false binds them in the driver,
        # unprepared (Django's default: for a pooler that cannot keep prepared statements).
        prepared = query.pop("server_side_binding", "true").lower() not in FALSE_WORDS
        return {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": unquote(parts.path.lstrip("/")),
            "USER": unquote(parts.username or ""),
            "PASSWORD": unquote(parts.password or ""),
            "HOST": parts.hostname or "",
            "PORT": str(parts.port or ""),
            # Each worker process borrows connections from its own pool (Django's psycopg
            # pool) and gives them back after every call: at most GUIDEPOST_DB_POOL_SIZE
            # connections per worker, however many clients. A pool keeps its
            # connections itself, so CONN_MAX_AGE must stay 0.
            "CONN_MAX_AGE": 0,
            "OPTIONS": {
                "pool": {
                    "min_size": 1,
                    "max_size": GUIDEPOST_DB_POOL_SIZE,
                    # How long a call waits for a free connection before "server busy".
                    "timeout": GUIDEPOST_DB_POOL_TIMEOUT,
                },
                **({"server_side_binding": True, "prepare_threshold": 5} if prepared else {}),
                **query,
            },
            "TEST": {"NAME": test_name},
        }
    raise ImproperlyConfigured(
        f"DATABASE_URL={url!r}: unsupported scheme {parts.scheme!r} (use sqlite:/// or postgres://)"
    )


# What the server writes: its SQLite database and collected static files, and installed,
# its flows directory. A checkout's var/, else the user's data directory (ADR 0115).
GUIDEPOST_DATA_DIR = env_path("GUIDEPOST_DATA_DIR", default_data_dir(os.environ))
# What relative paths of DATABASE_URL start from and the local secret key is made of: the
# checkout, or installed, the data directory (site-packages is never written).
INSTANCE_DIR = GUIDEPOST_DATA_DIR if INSTALLED else SHIPPED

# Connections each worker process may hold to PostgreSQL, and the threads that run tool
# calls in it (the same number, so a call never waits for a connection it cannot get).
GUIDEPOST_DB_POOL_SIZE = env_int("GUIDEPOST_DB_POOL_SIZE", 8, minimum=1)
GUIDEPOST_DB_POOL_TIMEOUT = env_float("GUIDEPOST_DB_POOL_TIMEOUT", 10.0, minimum=0.1)
# How long a SQLite writer waits for another one's lock before "server busy" (seconds).
GUIDEPOST_SQLITE_TIMEOUT = env_float("GUIDEPOST_SQLITE_TIMEOUT", 20.0, minimum=0.0)


def sqlite_database(path: Path) -> dict[str, object]:
    # A directory that cannot be made is reported by `serve` (naming DATABASE_URL), not
    # here: commands that need no database, such as lint, still run.
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
    return {
        # Django's SQLite backend, with one process's writers queued.
        "ENGINE": "guidepost.db.sqlite3",
        "NAME": str(path),
        # IMMEDIATE takes the write lock at BEGIN, so a busy writer waits for the
        # timeout instead of failing at once on a read-to-write upgrade.
        "OPTIONS": {
            "transaction_mode": "IMMEDIATE",
            "timeout": GUIDEPOST_SQLITE_TIMEOUT,
            # secure_delete: what is erased or deleted is overwritten with zeros in the
            # file, not left in free space (docs/privacy.md; Debian's SQLite has it on).
            "init_command": (
                "PRAGMA journal_mode=WAL;PRAGMA synchronous=NORMAL;PRAGMA foreign_keys=ON;"
                "PRAGMA secure_delete=ON;"
            ),
        },
        "TEST": {"NAME": str(path.with_name(f"test_{path.name}"))},
        # One connection per thread, kept: SQLite has no server side to exhaust.
        "CONN_MAX_AGE": None,
    }


DEBUG = env_bool("GUIDEPOST_DEBUG", False)
SECRET_KEY = os.environ.get("GUIDEPOST_SECRET_KEY", "")
if not SECRET_KEY:
    if not DEBUG and env_bool("GUIDEPOST_REQUIRE_SECRET_KEY", False):
        raise ImproperlyConfigured("GUIDEPOST_SECRET_KEY must be set")
    # Local default: stable per checkout or data directory, never shared; production sets
    # the variable.
    SECRET_KEY = "guidepost-local-" + str(INSTANCE_DIR)

ALLOWED_HOSTS = [
    h.strip() for h in env_str("GUIDEPOST_ALLOWED_HOSTS", "127.0.0.1,localhost,[::1]").split(",")
]
# Extra origins allowed to call /mcp from a browser (loopback origins always are).
GUIDEPOST_ALLOWED_ORIGINS = [
    o.strip() for o in env_str("GUIDEPOST_ALLOWED_ORIGINS", "").split(",") if o.strip()
]
if INSTALLED and not os.environ.get("GUIDEPOST_FLOWS_DIR"):
    # The catalog copier writes into the flows directory: installed, it is a copy of the
    # bundled flows in the data directory, made the first time.
    try:
        GUIDEPOST_FLOWS_DIR = flows_copy(GUIDEPOST_DATA_DIR)
    except OSError as exc:
        raise ImproperlyConfigured(
            f"GUIDEPOST_DATA_DIR={str(GUIDEPOST_DATA_DIR)!r}: cannot copy the bundled flows "
            f"into it ({exc.strerror or exc}): choose a directory this user can write"
        ) from None
else:
    GUIDEPOST_FLOWS_DIR = env_dir("GUIDEPOST_FLOWS_DIR", SHIPPED / "flows")
# Where `serve` listens; `serve --host` sets it before settings are read, so every worker
# knows whether it listens beyond loopback (then agent keys are required).
GUIDEPOST_HOST = env_str("GUIDEPOST_HOST", "127.0.0.1")
# auto (keys required once one exists, and whenever the server is reachable beyond
# loopback), required, or off (refused at start-up unless listening on loopback).
GUIDEPOST_AUTH = env_choice("GUIDEPOST_AUTH", "auto", AUTH_MODES)
# Proxies whose X-Forwarded-For / X-Forwarded-Proto are believed; nobody's by default.
GUIDEPOST_TRUSTED_PROXIES = env_addresses("GUIDEPOST_TRUSTED_PROXIES")
GUIDEPOST_PORT = env_int("GUIDEPOST_PORT", 8127, minimum=1)
# OAuth 2.1 access tokens beside agent keys: the authorization server whose tokens are
# accepted (its issuer URL; empty: none), the audience they must name, and the client
# credentials that let this server ask it about opaque (non-JWT) tokens (RFC 7662).
GUIDEPOST_OAUTH_ISSUER = env_str("GUIDEPOST_OAUTH_ISSUER", "")
GUIDEPOST_OAUTH_AUDIENCE = env_str("GUIDEPOST_OAUTH_AUDIENCE", "")
GUIDEPOST_OAUTH_CLIENT_ID = env_str("GUIDEPOST_OAUTH_CLIENT_ID", "")
GUIDEPOST_OAUTH_CLIENT_SECRET = env_str("GUIDEPOST_OAUTH_CLIENT_SECRET", "")
# The scopes that let a token walk flows and propose them, as the issuer names them.
GUIDEPOST_OAUTH_SCOPES = [
    scope.strip()
    for scope in env_str("GUIDEPOST_OAUTH_SCOPES", "guidepost:walk,guidepost:draft").split(",")
]
# How often every worker looks for changed flow files, and each instance for a changed
# catalog in the database (seconds).
GUIDEPOST_FLOWS_POLL = env_int("GUIDEPOST_FLOWS_POLL_MS", 500, minimum=50) / 1000
# Who may read /metrics: these addresses or networks (loopback unless set; empty:
# none), or anyone sending this token as `Authorization: Bearer` (empty: no token).
GUIDEPOST_METRICS_ALLOW = (
    env_addresses("GUIDEPOST_METRICS_ALLOW")
    if "GUIDEPOST_METRICS_ALLOW" in os.environ
    else ["127.0.0.1", "::1"]
)
GUIDEPOST_METRICS_TOKEN = env_str("GUIDEPOST_METRICS_TOKEN", "")

# The rate limit: each caller (an agent key, or a keyless caller's address) may make
# GUIDEPOST_RATE_BURST calls at once, refilled at GUIDEPOST_RATE_PER_SECOND; a burst of 0
# turns the limit off. A key may have its own (createkey --rate-burst/--rate-per-second).
# The buckets live in the database, or in Redis when REDIS_URL is set.
GUIDEPOST_RATE_BURST = env_int("GUIDEPOST_RATE_BURST", 120, minimum=0)
GUIDEPOST_RATE_PER_SECOND = env_float("GUIDEPOST_RATE_PER_SECOND", 40.0, minimum=0.001)
# Requests refused for a missing, unknown or revoked agent key, per address and worker
# process: a burst, refilled per second; past it such an address is answered 429 without
# a key lookup. A burst of 0 turns it off.
GUIDEPOST_REFUSED_BURST = env_int("GUIDEPOST_REFUSED_BURST", 20, minimum=0)
GUIDEPOST_REFUSED_PER_SECOND = env_float("GUIDEPOST_REFUSED_PER_SECOND", 2.0, minimum=0.001)
# Drafts each caller may send an hour (guide_draft; a bucket of that many, refilled over
# the hour); 0 turns the budget off. Judging a draft costs a thousand steps' CPU.
GUIDEPOST_DRAFTS_PER_HOUR = env_int("GUIDEPOST_DRAFTS_PER_HOUR", 10, minimum=0)
# Runs callers without a key may start per address and day (UTC); 0: no cap. A key's own
# cap is createkey --runs-per-day.
GUIDEPOST_KEYLESS_RUNS_PER_DAY = env_int("GUIDEPOST_KEYLESS_RUNS_PER_DAY", 0, minimum=0)
REDIS_URL = env_str("REDIS_URL", "")
GUIDEPOST_TOOL_THREADS = GUIDEPOST_DB_POOL_SIZE

# Connections, per worker process: a client has GUIDEPOST_HEADER_TIMEOUT
# seconds to send a request's line and headers (from connecting, or from the request's
# first byte on a kept-alive connection), then GUIDEPOST_BODY_TIMEOUT seconds to send its
# body; past either the connection is closed. Past GUIDEPOST_LIMIT_CONCURRENCY requests
# being served at once a request is answered 503 (idle connections do not count: the
# deadlines and the keep-alive time-out bound them); GUIDEPOST_BACKLOG connections wait
# in the kernel.
GUIDEPOST_HEADER_TIMEOUT = env_float("GUIDEPOST_HEADER_TIMEOUT", 10.0, minimum=0.1)
GUIDEPOST_BODY_TIMEOUT = env_float("GUIDEPOST_BODY_TIMEOUT", 30.0, minimum=0.1)
# On SIGTERM a serving process stops taking requests (/readyz answers 503) and answers
# those under way for at most this many seconds before it exits.
GUIDEPOST_SHUTDOWN_GRACE = env_float("GUIDEPOST_SHUTDOWN_GRACE", 20.0, minimum=0.0)
# An idle kept-alive connection is closed after this many seconds: longer than clients and
# proxies keep theirs (httpx 5 s, nginx 60 s), so that they let go first.
GUIDEPOST_KEEPALIVE_TIMEOUT = env_int("GUIDEPOST_KEEPALIVE_TIMEOUT", 65, minimum=1)
GUIDEPOST_LIMIT_CONCURRENCY = env_int("GUIDEPOST_LIMIT_CONCURRENCY", 1000, minimum=1)
GUIDEPOST_BACKLOG = env_int("GUIDEPOST_BACKLOG", 1024, minimum=1)

# The ledger: `serve` seals runs and audit records every GUIDEPOST_SEAL_INTERVAL
# seconds (0: never; `verify --heads` still seals), up to GUIDEPOST_SEAL_MARGIN seconds
# ago: longer than any transaction lasts and than the clocks of two instances differ.
GUIDEPOST_SEAL_INTERVAL = env_float("GUIDEPOST_SEAL_INTERVAL", 60.0, minimum=0.0)
GUIDEPOST_SEAL_MARGIN = env_float("GUIDEPOST_SEAL_MARGIN", 300.0, minimum=0.0)

# Events and webhooks. The base of the links events carry (a run's page), added by the
# worker that sends them: how people reach this server (default: the address it listens
# on, which `serve --host`/`--port` set).
GUIDEPOST_PUBLIC_URL = env_str(
    "GUIDEPOST_PUBLIC_URL", f"http://{GUIDEPOST_HOST}:{GUIDEPOST_PORT}"
).rstrip("/")
# How long a process trusts what it read of the subscriptions (seconds): a subscription
# added by another process receives events at most this long after it is added.
GUIDEPOST_EVENTS_CACHE = env_float("GUIDEPOST_EVENTS_CACHE", 1.0, minimum=0.0)
# Receivers on private, loopback and link-local addresses are refused unless this is set.
GUIDEPOST_WEBHOOK_ALLOW_PRIVATE = env_bool("GUIDEPOST_WEBHOOK_ALLOW_PRIVATE", False)
# One try, from connecting to the answer's end, at most this long (seconds): then it is
# cut off and has failed.
GUIDEPOST_WEBHOOK_TIMEOUT = env_float("GUIDEPOST_WEBHOOK_TIMEOUT", 5.0, minimum=0.1)
# Retries: RETRY_BASE seconds after the first failure, doubling up to RETRY_MAX, for RETRY_FOR.
GUIDEPOST_WEBHOOK_RETRY_BASE = env_float("GUIDEPOST_WEBHOOK_RETRY_BASE", 5.0, minimum=0.0)
GUIDEPOST_WEBHOOK_RETRY_MAX = env_float("GUIDEPOST_WEBHOOK_RETRY_MAX", 7200.0, minimum=0.0)
GUIDEPOST_WEBHOOK_RETRY_FOR = env_float("GUIDEPOST_WEBHOOK_RETRY_FOR", 86400.0, minimum=0.0)
# The worker: how often it looks for work (seconds), how many subscriptions it tries at once
# (a lane each), and how long a claimed delivery is its own before another worker may try
# it (longer than one try: a lane claims what its tries can make within it).
GUIDEPOST_WEBHOOK_POLL = env_float("GUIDEPOST_WEBHOOK_POLL", 1.0, minimum=0.01)
GUIDEPOST_WEBHOOK_CONCURRENCY = env_int("GUIDEPOST_WEBHOOK_CONCURRENCY", 4, minimum=1)
GUIDEPOST_WEBHOOK_LEASE = env_float("GUIDEPOST_WEBHOOK_LEASE", 60.0, minimum=1.0)
# After `webhook rotate`, the old secret signs beside the new one this long (seconds), so a
# receiver can switch over without refusing a delivery.
GUIDEPOST_WEBHOOK_SECRET_GRACE = env_float("GUIDEPOST_WEBHOOK_SECRET_GRACE", 86400.0, minimum=0.0)
# Retention (docs/privacy.md): ended runs erased, audit records deleted, so many
# days after; unset keeps everything. `guidepost-mcp retention` applies it (from cron), and
# `serve` every GUIDEPOST_RETENTION_INTERVAL seconds when either is set (0: never).
GUIDEPOST_RETENTION_DAYS = env_days("GUIDEPOST_RETENTION_DAYS")
GUIDEPOST_AUDIT_RETENTION_DAYS = env_days("GUIDEPOST_AUDIT_RETENTION_DAYS")
GUIDEPOST_RETENTION_INTERVAL = env_float("GUIDEPOST_RETENTION_INTERVAL", 3600.0, minimum=0.0)

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "servestatic",
    "django.contrib.staticfiles",
    "django.contrib.humanize",  # "2 minutes ago" on the pages
    "ninja",  # its templates and static files serve /api/docs without a CDN
    "axes",  # sign-in failures counted, and locked out
    "access_app",
    "events_app",  # events and webhooks
    "flows_app",
    "runs_app",
    "guidepost",  # the MCP transport, `serve`, the pages' shared static files
]

MIDDLEWARE = [
    # First: every API request is recorded, Host refusals included.
    "access_app.middleware.audit_api",
    # The security headers and the Content-Security-Policy (SECURE_CSP below, a nonce per
    # request) on every response, Host refusals included; none reads the Host
    # (SECURE_SSL_REDIRECT, which would, is off: the proxy redirects).
    "django.middleware.security.SecurityMiddleware",
    "django.middleware.csp.ContentSecurityPolicyMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Then a Host is judged as /mcp judges it, before anything else reads it.
    "access_app.middleware.host_check",
    # Before anything reads a parameter: NUL and other control characters get a 400.
    "access_app.web.refuse_control_characters",
    "servestatic.middleware.ServeStaticMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    # Last, as django-axes asks: turns a locked-out sign-in into its page.
    "axes.middleware.AxesMiddleware",
]

# Sign-in to the admin: django-axes counts failures per (user name, address)
# and per address; at GUIDEPOST_LOGIN_FAILURES the sign-in is locked for
# GUIDEPOST_LOGIN_COOLOFF_MINUTES, with a page that says so (429), recorded in the audit
# trail. The address is the one uvicorn gives (forwarded only by GUIDEPOST_TRUSTED_PROXIES).
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = env_int("GUIDEPOST_LOGIN_FAILURES", 5, minimum=1)
AXES_COOLOFF_TIME = timedelta(minutes=env_int("GUIDEPOST_LOGIN_COOLOFF_MINUTES", 15, minimum=1))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"], "ip_address"]
AXES_RESET_ON_SUCCESS = True
AXES_CLIENT_IP_CALLABLE = "access_app.lockouts.client_address"
AXES_LOCKOUT_TEMPLATE = "admin/lockout.html"
AXES_VERBOSE = False

ROOT_URLCONF = "guidepost.urls"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [SHIPPED / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                # {{ csp_nonce }} and {% csp_nonce_attr %} for the few inline <style> blocks.
                "django.template.context_processors.csp",
            ],
        },
    },
]
ASGI_APPLICATION = "guidepost.asgi.application"

DATABASES = {
    "default": database_from_url(os.environ["DATABASE_URL"])
    if os.environ.get("DATABASE_URL")
    else sqlite_database(GUIDEPOST_DATA_DIR / "guidepost.sqlite3")
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
# The admin's times as the pages write them, UTC and 24-hour (guidepost/formats/en).
FORMAT_MODULE_PATH = ["guidepost.formats"]
USE_I18N = True
USE_TZ = True
STATIC_URL = "static/"
# Collected by `serve` before it listens; served by ServeStatic's middleware.
STATIC_ROOT = GUIDEPOST_DATA_DIR / "static"
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "guidepost.staticfiles.StaticFilesStorage"},
}
# Pages and the API docs send people who are not signed in to the admin's login.
LOGIN_URL = "admin:login"

# Headers every page, the admin and the API send. Nothing may frame a page
# (clickjacking the approve button); a response is never sniffed into another type; a
# link followed off-site carries no Referer (run ids are in page addresses).
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
# Content-Security-Policy: this server's files only, no inline script at all (the pages
# load guidepost/pages.js; the admin's scripts are files), inline <style> only with the
# request's nonce (the review pages' stylesheet), images also as data: URIs (the API
# docs' stylesheet draws its icons so), nothing may frame a page, forms post here only.
SECURE_CSP = {
    "default-src": [CSP.SELF],
    "script-src": [CSP.SELF],
    "style-src": [CSP.SELF, CSP.NONCE],
    "img-src": [CSP.SELF, "data:"],
    "object-src": [CSP.NONE],
    "base-uri": [CSP.NONE],
    "form-action": [CSP.SELF],
    "frame-ancestors": [CSP.NONE],
}

# Served over HTTPS (TLS ends at the reverse proxy, docs/deploy.md): the session and CSRF
# cookies are then sent over HTTPS only. Off by default: a local server is plain HTTP.
GUIDEPOST_HTTPS = env_bool("GUIDEPOST_HTTPS", False)
SESSION_COOKIE_SECURE = GUIDEPOST_HTTPS
CSRF_COOKIE_SECURE = GUIDEPOST_HTTPS
# `check --deploy` exceptions, each the reverse proxy's job in every deployment we
# document (docs/deploy.md): `serve` speaks plain HTTP only, so redirecting
# http:// to https:// (W008) and sending Strict-Transport-Security (W004) happen where TLS
# ends. GUIDEPOST_SILENCED_CHECKS replaces the list (empty: silence nothing).
SILENCED_SYSTEM_CHECKS = [
    c.strip()
    for c in env_str("GUIDEPOST_SILENCED_CHECKS", "security.W004,security.W008").split(",")
    if c.strip()
]

# OpenTelemetry traces of MCP calls, exported over OTLP (guidepost.tracing; the otel extra).
GUIDEPOST_TRACES = env_choice("GUIDEPOST_TRACES", "off", ("off", "otlp"))
# Each log record one line: text, or a JSON object for log collectors (guidepost.logs).
GUIDEPOST_LOG_FORMAT = env_choice("GUIDEPOST_LOG_FORMAT", "text", ("text", "json"))
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "text": {
            "()": "guidepost.logs.PlainLines",
            "format": "%(asctime)s %(levelname)s %(name)s: %(message)s",
        },
        "json": {"()": "guidepost.logs.JsonLines"},
    },
    "filters": {
        # A refused request is one line, not a traceback.
        "one_line_refusals": {"()": "guidepost.logs.OneLineRefusals"},
        "request_ids": {"()": "access_app.request_ids.RequestIds"},
    },
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "formatter": GUIDEPOST_LOG_FORMAT,
            "filters": ["one_line_refusals", "request_ids"],
        }
    },
    "root": {"handlers": ["console"], "level": env_str("GUIDEPOST_LOG_LEVEL", "INFO")},
    "loggers": {
        "mcp": {"level": "WARNING"},
        "httpx2": {"level": "WARNING"},
        # One line per tool call and API request (access_app.audit), whatever the root level.
        "guidepost.access": {"level": "INFO"},
        # serve's start, with JSON logs (else printed).
        "guidepost.serve": {"level": "INFO"},
    },
}
