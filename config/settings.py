"""Podium settings, read from the environment with embedded defaults.

With no environment at all Podium runs embedded: a SQLite file under var/, Celery tasks executed
in-process, mail printed to the console. Production (docker-compose.yml) and CI set DATABASE_URL
to PostgreSQL and CELERY_BROKER_URL to Redis.
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path
from typing import Any

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from config.env import ImproperlyConfiguredEnv, email_settings, env_bool, env_int, env_list, env_secret, env_str

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("PODIUM_VAR_DIR", str(BASE_DIR / "var")))
VAR_DIR.mkdir(parents=True, exist_ok=True)

# The "django-insecure-" prefix makes `manage.py check --deploy` flag a production run that
# forgot to set SECRET_KEY.
SECRET_KEY = env_secret("SECRET_KEY", "django-insecure-podium-development-key-change-me")
DEBUG = env_bool("DEBUG", False)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_htmx",
    # Podium's apps, in dependency order: each imports only the ones above it (docs/architecture.md).
    "catalog",
    "accounts",
    "ingest",
    "reviews",
    "runners",
    "leaderboard",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    # Below WhiteNoise: static files are served compressed by it and never reach this one.
    "core.middleware.Compress",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    # Django's, with the user read in the session's own statement (accounts.sessions).
    "accounts.sessions.AuthenticationMiddleware",
    "accounts.viewer.ViewerMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    # After the ones the refusal page's context reads (the user, the messages), before every view.
    "core.middleware.RefuseNul",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
]

ROOT_URLCONF = "config.urls"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "leaderboard.context_processors.site",
                "accounts.context_processors.demo_accounts",
            ],
        },
    },
]

WSGI_APPLICATION = "config.wsgi.application"

# Connections are kept for ten minutes from when they were opened (docs/operating.md): opening one per request
# cost PostgreSQL a backend start and a TLS/auth round trip each time, and a new backend's first uses of the
# tables cost more again (an upload's answer: 4-5 ms to connect, then its statements 11-13 ms slower than on the
# same connection again; a minute's age made each thread pay that every minute, and on a quiet site most
# requests). The health check, run when a request reuses a connection, replaces one the server closed meanwhile
# (a restart, an idle timeout) instead of failing.
DATABASES = {
    "default": dj_database_url.parse(
        env_str("DATABASE_URL", f"sqlite:///{VAR_DIR / 'podium.sqlite3'}"),
        conn_max_age=env_int("DATABASE_CONN_MAX_AGE", 600, minimum=0),
        conn_health_checks=True,
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    # libpq waits forever by default for a server that accepts the connection and answers nothing (a stuck
    # host, a half-open route): each request and /healthz would hold a thread of the web server until then.
    # A URL's own ?connect_timeout= wins, as for the options below.
    DATABASES["default"].setdefault("OPTIONS", {}).setdefault("connect_timeout", 5)
    # A kept connection (CONN_MAX_AGE) to a host that vanished (a failover, a dead machine, a cut route) fails
    # only when TCP gives up: ~15 minutes for a query sent to it (the kernel retransmits it), two hours for
    # one it was already running (the first keepalive). Each such request holds its thread of the web server
    # that long. Sent bytes unacknowledged for 10 s, or 10 s of silence and then probes unanswered, close it
    # instead. A server process that is merely paused is not caught: its kernel still acknowledges.
    for option, value in {"tcp_user_timeout": 10_000, "keepalives_idle": 10, "keepalives_interval": 5,
                          "keepalives_count": 3}.items():
        DATABASES["default"]["OPTIONS"].setdefault(option, value)
# The few statements Podium marks (core.prepared: the results page's rows by id) are prepared per connection.
# Behind a pooler that cannot keep prepared statements (PgBouncer in transaction mode before 1.21), set
# DATABASE_PREPARED_STATEMENTS=0: they are then sent as every other statement.
PODIUM_PREPARED_STATEMENTS = env_bool("DATABASE_PREPARED_STATEMENTS", True)
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Imports write one item per transaction while pages read; WAL keeps readers from blocking.
    DATABASES["default"].setdefault("OPTIONS", {})
    DATABASES["default"]["OPTIONS"].update(
        {
            "timeout": 20,
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
            # Take the write lock when a transaction starts: a deferred transaction that later
            # upgrades fails at once with "database is locked" when another process writes.
            "transaction_mode": "IMMEDIATE",
        }
    )
    # A file, not memory, so that a real worker process in the integration tests sees the test data;
    # one per process, so that test runs side by side do not share it.
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / f"test-podium-{os.getpid()}.sqlite3")}

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "/static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(env_str("STATIC_ROOT", str(BASE_DIR / "staticfiles")))
STORAGES: dict[str, dict[str, Any]] = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": (
            "django.contrib.staticfiles.storage.StaticFilesStorage"
            if DEBUG
            else "whitenoise.storage.CompressedStaticFilesStorage"
        )
    },
}
STATICFILES_FINDERS = [
    "django.contrib.staticfiles.finders.FileSystemFinder",
    "django.contrib.staticfiles.finders.AppDirectoriesFinder",
    # plotly.js from the installed plotly package, as vendor/plotly-<version>.min.js
    "leaderboard.static_files.PlotlyFinder",
]
WHITENOISE_USE_FINDERS = DEBUG
# A name that carries a version never changes content: browsers may keep it a year.
WHITENOISE_IMMUTABLE_FILE_TEST = r"/vendor/plotly-[^/]+\.min\.js$"

CACHES: dict[str, dict[str, Any]] = {
    "default": {
        "BACKEND": "core.locmem.BoundedLocMemCache",
        "LOCATION": "podium",
        # Django's default keeps 300 entries and then drops a third of them: one visit of every page at the
        # bench's 20,000 results (91 pages) keeps ~900 (8.7 MB; each round's part of a benchmark's or an
        # organization's page is one), so a second visit found almost nothing and took as long as the first
        # (3.2 s; 0.15 s with room). The bytes are bounded too (core.locmem): stale generations' pages pile
        # up while a round takes uploads.
        "OPTIONS": {"MAX_ENTRIES": 3000, "MAX_BYTES": 32 * 2**20},
    }
}
if env_str("CACHE_URL", ""):
    CACHES["default"] = {
        # Django's RedisCache, but a Redis that cannot be reached is an empty cache, not a 500 on every page.
        "BACKEND": "core.rediscache.ResilientRedisCache",
        "LOCATION": env_str("CACHE_URL", ""),
    }

# Uploads: limits a bundle must stay within (archive bombs, oversized files), checked before storing.
PODIUM_BUNDLE_DIR = Path(env_str("PODIUM_BUNDLE_DIR", str(VAR_DIR / "bundles")))
# Where bundles and reproduction logs are stored, under relative keys (ingest/storage.py): a folder on this
# host (PODIUM_BUNDLE_DIR's parent: one host, or a volume every host mounts) or an S3-compatible bucket,
# which lets workers run on other hosts. docs/operating.md, "Storage".
PODIUM_BUNDLE_STORAGE = env_str("PODIUM_BUNDLE_STORAGE", "filesystem")
if PODIUM_BUNDLE_STORAGE == "filesystem":
    STORAGES["bundles"] = {"BACKEND": "ingest.storage.BundleFileSystemStorage"}
elif PODIUM_BUNDLE_STORAGE == "s3":
    if not env_str("AWS_STORAGE_BUCKET_NAME", ""):
        raise ImproperlyConfiguredEnv("PODIUM_BUNDLE_STORAGE=s3 needs AWS_STORAGE_BUCKET_NAME")
    STORAGES["bundles"] = {
        "BACKEND": "storages.backends.s3.S3Storage",
        "OPTIONS": {
            "bucket_name": env_str("AWS_STORAGE_BUCKET_NAME", ""),
            # Unset: AWS itself; set for any other S3-compatible service.
            "endpoint_url": env_str("AWS_S3_ENDPOINT_URL", "") or None,
            "region_name": env_str("AWS_S3_REGION_NAME", "") or None,
            # Unset: boto3 finds credentials itself (its environment variables, an instance role).
            "access_key": env_secret("AWS_ACCESS_KEY_ID", "") or None,
            "secret_key": env_secret("AWS_SECRET_ACCESS_KEY", "") or None,
            "location": env_str("AWS_LOCATION", ""),
            # Content-addressed keys: the same name is the same bytes, never a renamed copy.
            "file_overwrite": True,
            "default_acl": None,
            "querystring_auth": True,
        },
    }
else:
    raise ImproperlyConfiguredEnv(f"PODIUM_BUNDLE_STORAGE must be filesystem or s3, not {PODIUM_BUNDLE_STORAGE!r}")
PODIUM_MAX_BUNDLE_BYTES = env_int("PODIUM_MAX_BUNDLE_BYTES", 200 * 2**20, minimum=1)
PODIUM_MAX_FILE_BYTES = env_int("PODIUM_MAX_FILE_BYTES", 64 * 2**20, minimum=1)
PODIUM_MAX_EXTRACTED_BYTES = env_int("PODIUM_MAX_EXTRACTED_BYTES", 2**30, minimum=1)
PODIUM_MAX_MEMBERS = env_int("PODIUM_MAX_MEMBERS", 5000, minimum=1)
PODIUM_MAX_RATIO = float(env_int("PODIUM_MAX_RATIO", 100, minimum=1))
DATA_UPLOAD_MAX_MEMORY_SIZE = 5 * 2**20
FILE_UPLOAD_MAX_MEMORY_SIZE = 5 * 2**20  # larger uploads stream to a temporary file
# ... in a folder of Podium's own, so that what a killed web process leaves there is collected
# (ingest.cleanup), not left in the system's /tmp.
FILE_UPLOAD_TEMP_DIR = str(Path(env_str("PODIUM_UPLOAD_TEMP_DIR", str(VAR_DIR / "upload-tmp"))))
Path(FILE_UPLOAD_TEMP_DIR).mkdir(parents=True, exist_ok=True)

# Verification on the worker: the hard time limit kills a stuck task; the sweeper re-dispatches a
# submission left "verifying" past the deadline (which must exceed the time limit, or a slow but
# living worker could be duplicated) and one left "received" past PODIUM_REQUEUE_AFTER.
PODIUM_VERIFY_TIME_LIMIT = env_int("PODIUM_VERIFY_TIME_LIMIT", 600, minimum=60)
PODIUM_VERIFY_DEADLINE = timedelta(seconds=env_int("PODIUM_VERIFY_DEADLINE", 660, minimum=61))
PODIUM_REQUEUE_AFTER = timedelta(seconds=env_int("PODIUM_REQUEUE_AFTER", 120, minimum=1))
PODIUM_VERIFY_MAX_ATTEMPTS = env_int("PODIUM_VERIFY_MAX_ATTEMPTS", 5, minimum=1)
# A verifying worker renews its lease every third of this; a lease that lapses means the worker died,
# and the sweeper (every 30 s) hands the submission to another: recovery within lease + 30 s.
PODIUM_VERIFY_LEASE = timedelta(seconds=env_int("PODIUM_VERIFY_LEASE", 60, minimum=3))
# GET /api/v1/submissions/<id>/?wait=S waits in the server for the state to move (ingest.waiting): at most
# this long per request, and at most this many requests per web process at once (each holds a thread).
PODIUM_STATUS_WAIT_MAX_S = env_int("PODIUM_STATUS_WAIT_MAX_S", 20, minimum=0)
PODIUM_STATUS_WAITERS = env_int("PODIUM_STATUS_WAITERS", 2, minimum=0)
if PODIUM_VERIFY_DEADLINE.total_seconds() <= PODIUM_VERIFY_TIME_LIMIT:
    raise ImproperlyConfiguredEnv("PODIUM_VERIFY_DEADLINE must exceed PODIUM_VERIFY_TIME_LIMIT")

# Reproduction runners: a lease is extended by each heartbeat; the sweeper re-queues a job whose
# runner stopped beating for longer than the lease.
PODIUM_RUNNER_LEASE = timedelta(seconds=env_int("PODIUM_RUNNER_LEASE", 60, minimum=5))
PODIUM_RUNNER_HEARTBEAT = env_int("PODIUM_RUNNER_HEARTBEAT", 10, minimum=1)
if PODIUM_RUNNER_LEASE.total_seconds() < 2 * PODIUM_RUNNER_HEARTBEAT:
    # One late or lost heartbeat must not cost a healthy runner its lease.
    raise ImproperlyConfiguredEnv("PODIUM_RUNNER_LEASE must be at least twice PODIUM_RUNNER_HEARTBEAT")

# Celery: with no broker configured the tasks run in-process (the embedded default).
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", "")
CELERY_TASK_ALWAYS_EAGER = CELERY_BROKER_URL == ""
# In-process (no broker) a task must behave as on a worker: retries re-run, failures stay in the task.
CELERY_TASK_EAGER_PROPAGATES = False
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_RESULT_BACKEND = None
CELERY_TASK_DEFAULT_QUEUE = env_str("CELERY_TASK_DEFAULT_QUEUE", "podium")
# Celery's Django fixup closes the database connection before and after every task unless this is set: each
# verification opened a new PostgreSQL connection (7.5 ms, a backend start). With it the fixup closes them
# every 1,000 tasks (it counts two closes a task), and config.celery recycles them as Django's requests do,
# by CONN_MAX_AGE and after an error (close_old_connections around each task; the health check replaces one
# the server closed).
CELERY_DB_REUSE_MAX = 1000
# mlperf-logging talks through the root logger; Podium captures that itself (ingest/engine/tool.py).
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
CELERY_TIMEZONE = TIME_ZONE
# With a Redis broker an unacknowledged task is redelivered after this; keep it well above the time
# limit so a long verification is never started twice by the broker itself.
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": 4 * PODIUM_VERIFY_TIME_LIMIT,
    # Without these a Redis that keeps the connection but answers nothing (stopped, a dead host behind a
    # kept TCP session, a paused client) holds the caller forever: an upload's request, /healthz, beat's
    # sweepers. A publish that fails is dispatched again by the sweeper (docs/operating.md, "When Redis
    # fails"). Both are well above a healthy Redis's answer (well under a millisecond here) and its pauses;
    # the answer's is above a worker's BRPOP (1 s), which a channel's close reads to its end.
    "socket_connect_timeout": 0.5,
    "socket_timeout": 2.0,
}
# A publish is tried again once (Celery's default: three times) so that a stuck broker costs an upload's
# request a few seconds at most; the sweeper hands out what could not be queued.
CELERY_TASK_PUBLISH_RETRY_POLICY = {"max_retries": 1, "interval_start": 0, "interval_step": 0.2, "interval_max": 0.2}
CELERY_BEAT_SCHEDULE = {
    # Scratch folders, upload temp files and orphaned bundle files older than PODIUM_LITTER_MAX_AGE.
    "sweep-litter": {"task": "ingest.cleanup.sweep_litter", "schedule": 900.0},
    "sweep-submissions": {"task": "ingest.tasks.sweep_submissions", "schedule": 30.0},
    "sweep-leases": {"task": "runners.tasks.sweep_leases", "schedule": 15.0},
    # Sessions past their expiry date, which Django leaves in the table.
    "sweep-sessions": {"task": "accounts.tasks.sweep_sessions", "schedule": 3600.0},
}

EMAIL_BACKEND = env_str("EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend")
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "podium@localhost")

LOGIN_URL = "/accounts/login/"
# Sign-in and password reset throttles (accounts.throttles, docs/operating.md): per account and per
# client address, in fixed windows. The first backend refuses a throttled attempt before any password check.
# ModelBackend's sign-in, with the signed-in user read with the session (accounts.sessions, SESSION_ENGINE).
AUTHENTICATION_BACKENDS = ["accounts.throttles.SignInThrottleBackend", "accounts.sessions.SessionUserBackend"]
SESSION_ENGINE = "accounts.sessions"
PODIUM_LOGIN_WINDOW = env_int("PODIUM_LOGIN_WINDOW", 900, minimum=60)
PODIUM_LOGIN_FAILURES_PER_ACCOUNT = env_int("PODIUM_LOGIN_FAILURES_PER_ACCOUNT", 10, minimum=1)
PODIUM_LOGIN_FAILURES_PER_ADDRESS = env_int("PODIUM_LOGIN_FAILURES_PER_ADDRESS", 50, minimum=1)
PODIUM_RESET_WINDOW = env_int("PODIUM_RESET_WINDOW", 3600, minimum=60)
PODIUM_RESET_REQUESTS_PER_ACCOUNT = env_int("PODIUM_RESET_REQUESTS_PER_ACCOUNT", 3, minimum=1)
PODIUM_RESET_REQUESTS_PER_ADDRESS = env_int("PODIUM_RESET_REQUESTS_PER_ADDRESS", 20, minimum=1)
# Reverse proxies in front of gunicorn that append to X-Forwarded-For (0: clients connect directly, and
# the header, which anyone can write, is ignored).
PODIUM_TRUSTED_PROXIES = env_int("PODIUM_TRUSTED_PROXIES", 0, minimum=0)
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/"
PODIUM_BASE_URL = env_str("PODIUM_BASE_URL", "http://127.0.0.1:8000").rstrip("/")

REST_FRAMEWORK = {
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "core.api.exception_handler",
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "accounts.authentication.ApiTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["accounts.authentication.TokenScopeAllows"],
    "DEFAULT_THROTTLE_CLASSES": [
        "rest_framework.throttling.AnonRateThrottle",
        "rest_framework.throttling.UserRateThrottle",
        "rest_framework.throttling.ScopedRateThrottle",
    ],
    "DEFAULT_THROTTLE_RATES": {
        "anon": env_str("PODIUM_THROTTLE_ANON", "120/minute"),
        "user": env_str("PODIUM_THROTTLE_USER", "600/minute"),
        "uploads": env_str("PODIUM_THROTTLE_UPLOADS", "60/hour"),
        "tokens": env_str("PODIUM_THROTTLE_TOKENS", "30/hour"),
        "agent": env_str("PODIUM_THROTTLE_AGENT", "6000/minute"),
    },
}
SPECTACULAR_SETTINGS = {
    # The documentation pages load their scripts from this site, never from a CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "TITLE": "Podium API",
    "DESCRIPTION": "Results of MLPerf-style training benchmarks",
    "VERSION": "1",
}

# Where verification copies a bundle before the mlperf-logging tools run on it: the tools write
# into their input folders, so they never see the stored original.
PODIUM_SCRATCH_DIR = Path(env_str("PODIUM_SCRATCH_DIR", str(VAR_DIR / "scratch")))
# Scratch entries, upload temp files and unreferenced bundle files older than this (seconds) were left by
# a process that died: the litter sweep removes them. Longer than any verification may run.
PODIUM_LITTER_MAX_AGE = env_int("PODIUM_LITTER_MAX_AGE", 3600, minimum=60)
if PODIUM_LITTER_MAX_AGE <= PODIUM_VERIFY_TIME_LIMIT:
    raise ImproperlyConfiguredEnv("PODIUM_LITTER_MAX_AGE must exceed PODIUM_VERIFY_TIME_LIMIT")
# Worker processes an import may use for the checkers (they are not thread-safe, so parallelism
# is by process). 0 = one per CPU.
PODIUM_IMPORT_JOBS = env_int("PODIUM_IMPORT_JOBS", 0, minimum=0)
PODIUM_DEMO_BANNER = env_bool("PODIUM_DEMO_BANNER", False)

# --- Deployment --------------------------------------------------------------------------------------------
# PODIUM_DEPLOYMENT=production (docker-compose.yml sets it) turns on HTTPS-only cookies, HSTS and the HTTPS
# redirect, and refuses to start without what production needs (docs/operating.md lists the variables).
PODIUM_DEPLOYMENT = env_str("PODIUM_DEPLOYMENT", "embedded")
if PODIUM_DEPLOYMENT not in ("embedded", "production"):
    raise ImproperlyConfiguredEnv(f"PODIUM_DEPLOYMENT must be embedded or production, not {PODIUM_DEPLOYMENT!r}")
PRODUCTION = PODIUM_DEPLOYMENT == "production"
if EMAIL_URL := env_secret("EMAIL_URL", ""):
    globals().update(email_settings(EMAIL_URL))
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = env_bool("PODIUM_SECURE_COOKIES", PRODUCTION)
SECURE_SSL_REDIRECT = env_bool("PODIUM_SSL_REDIRECT", PRODUCTION)
SECURE_HSTS_SECONDS = env_int("PODIUM_HSTS_SECONDS", 31536000 if PRODUCTION else 0, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("PODIUM_HSTS_INCLUDE_SUBDOMAINS", PRODUCTION)
SECURE_HSTS_PRELOAD = env_bool("PODIUM_HSTS_PRELOAD", PRODUCTION)
# Behind a proxy that terminates TLS (set only when the proxy always sets this header).
if env_bool("PODIUM_BEHIND_TLS_PROXY", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
# /healthz answers the load balancer over plain HTTP inside the network.
SECURE_REDIRECT_EXEMPT = [r"^healthz$"]
if PRODUCTION:
    problems = []
    if DEBUG:
        problems.append("DEBUG must be 0")
    if SECRET_KEY.startswith("django-insecure") or len(SECRET_KEY) < 50 or len(set(SECRET_KEY)) < 5:
        problems.append("SECRET_KEY (or SECRET_KEY_FILE) must be a random string of at least 50 characters")
    if CACHES["default"]["BACKEND"].endswith("LocMemCache"):
        problems.append("CACHE_URL must name a shared cache (redis://…): a per-process cache serves stale pages "
                        "and throttles nothing across workers")
    if "PODIUM_BASE_URL" not in os.environ:
        problems.append("PODIUM_BASE_URL must be set (links in e-mails use it), e.g. https://podium.example.org")
    if not EMAIL_URL and EMAIL_BACKEND.endswith("console.EmailBackend"):
        problems.append("EMAIL_URL must be set (smtp://user:password@host:587): mail would only be printed")
    if problems:
        raise ImproperlyConfigured("Podium cannot start in production: " + "; ".join(problems) + ".")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "loggers": {
        "podium": {"handlers": ["console"], "level": env_str("PODIUM_LOG_LEVEL", "INFO")},
        "django": {"handlers": ["console"], "level": "WARNING", "propagate": False},
        "celery": {"handlers": ["console"], "level": "INFO", "propagate": False},
        # mlperf-logging reports through the root logger; the engine captures those records
        # itself, so they must not also spill onto the console.
        "": {"handlers": [], "level": "WARNING"},
    },
}

# Result's covering indexes INCLUDE columns for PostgreSQL's index-only scans; SQLite (the embedded default)
# builds them on their key columns alone, which is all its small databases need. Said once here rather than
# as a warning on every `migrate` of `make run`.
SILENCED_SYSTEM_CHECKS = ["models.W040"]
