"""Argus settings, driven by environment variables (see .env.example for every one of them).

Importing this module never touches the database: a Ray worker image runs
``manage.py raynode`` with no database at all.
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

import dj_database_url
import django_stubs_ext
from django.core.exceptions import ImproperlyConfigured

from common.renamed_settings import SettingError, seconds_setting  # pure modules: settings may import them

# Django's generic classes (ModelAdmin[Task], ModelForm[User]) subscriptable at run time too,
# as their stubs declare them: a subclass names the model it serves, and mypy checks it.
django_stubs_ext.monkeypatch()

BASE_DIR = Path(__file__).resolve().parent.parent


def envbool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    return value.strip().lower() in ("1", "true", "yes", "on")


def envint(name: str, default: int) -> int:
    value = os.environ.get(name, "")
    return int(value) if value.strip() else default


def envfloat(name: str, default: float) -> float:
    value = os.environ.get(name, "")
    return float(value) if value.strip() else default


def envstr(name: str, default: str) -> str:
    value = os.environ.get(name, "")
    return value if value.strip() else default


def envlist(name: str, default: str) -> list[str]:
    return [item.strip() for item in envstr(name, default).split(",") if item.strip()]


# The old names (common.renamed_settings) this start read: the system check warns with the new ones.
ARGUS_RENAMED_SETTINGS_READ: list[str] = []


def envseconds(name: str, default: str) -> int:
    """A duration ``*_S``: seconds, or 90m, 12h, 2d; its old name still read, converted."""
    try:
        seconds, old = seconds_setting(os.environ, name, default)
    except SettingError as error:
        raise ImproperlyConfigured(str(error)) from None
    if old is not None:
        ARGUS_RENAMED_SETTINGS_READ.append(old)
    return seconds


DEBUG = envbool("ARGUS_DEBUG", False)
SECRET_KEY = os.environ.get("ARGUS_SECRET_KEY", "")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured("ARGUS_SECRET_KEY is required when ARGUS_DEBUG is off")
    SECRET_KEY = "argus-insecure-development-key"
# Users' secrets (accounts.secrets) are encrypted with these Fernet keys, comma-separated: the
# first encrypts, any decrypts (rotation). Unset in development: a key derived from SECRET_KEY;
# unset in production: secrets cannot be stored, and a start with secrets stored fails its
# system check (accounts.checks).
ARGUS_SECRETS_KEY = envlist("ARGUS_SECRETS_KEY", "")
ALLOWED_HOSTS = envlist("ARGUS_ALLOWED_HOSTS", "localhost,127.0.0.1,[::1],testserver")
CSRF_TRUSTED_ORIGINS = envlist("ARGUS_CSRF_TRUSTED_ORIGINS", "")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_q",
    "axes",
    "accounts",
    "tasks",
    "raypool",
    "webhooks",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "common.csp.ContentSecurityPolicyMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "accounts.middleware.TokenSessionMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Last, as django-axes asks: it turns a locked-out sign-in into accounts.throttle's page.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "argus_site.urls"
WSGI_APPLICATION = "argus_site.wsgi.application"

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
                "tasks.web.context_processors.admission",
            ],
        },
    },
]

# SQLite by default, on local disk under var/. WAL lets the web service read while the
# scheduler writes; IMMEDIATE makes writers queue for the lock instead of failing with
# "database is locked"; the timeout is how long they queue (RAY_NOTES.md).
DEFAULT_DATABASE_URL = f"sqlite:///{BASE_DIR / 'var' / 'argus.sqlite3'}"
# Each connection is kept between requests (for ARGUS_DB_CONN_MAX_AGE_S; 0: one per request):
# opening one costs more CPU than a submission's queries (SQLite's PRAGMAs, ~0.7 ms a request,
# bench/api_intake.py). Health checks replace one the database server closed meanwhile.
DATABASES = {
    "default": dj_database_url.parse(
        envstr("DATABASE_URL", DEFAULT_DATABASE_URL),
        conn_max_age=envseconds("ARGUS_DB_CONN_MAX_AGE_S", "600"),
        conn_health_checks=True,
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    DATABASES["default"]["OPTIONS"] = {
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        "transaction_mode": "IMMEDIATE",
        "timeout": 20,
    }
    # A file, not memory, so that tests can run a real qcluster against the test database.
    DATABASES["default"]["TEST"] = {"NAME": f"/tmp/argus-test-{os.getpid()}.sqlite3"}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# django-axes first: it refuses a locked-out account or address before the password is checked.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
# Failed password sign-ins are counted per account and per address, each on its own; past the
# limit both the web and the admin sign-in refuse for the cool-off (accounts/throttle.py).
ARGUS_LOGIN_FAILURE_LIMIT = envint("ARGUS_LOGIN_FAILURE_LIMIT", 10)
ARGUS_LOGIN_COOLOFF_S = envint("ARGUS_LOGIN_COOLOFF_S", 15 * 60)
# Reverse proxies in front of Argus that append to X-Forwarded-For (0: none, use the peer).
ARGUS_PROXY_HOPS = envint("ARGUS_PROXY_HOPS", 0)
AXES_FAILURE_LIMIT = ARGUS_LOGIN_FAILURE_LIMIT
AXES_COOLOFF_TIME = timedelta(seconds=ARGUS_LOGIN_COOLOFF_S)
AXES_LOCKOUT_PARAMETERS = ["username", "ip_address"]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_CALLABLE = "accounts.throttle.locked_out"
AXES_CLIENT_IP_CALLABLE = "accounts.throttle.client_address"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
LOGIN_URL = "/login/"
LOGIN_REDIRECT_URL = "/tasks/"
LOGOUT_REDIRECT_URL = "/login/"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "/static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = BASE_DIR / "var" / "staticfiles"
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    # Hashed names after `collectstatic` (production); plain names before it (dev, tests).
    "staticfiles": {"BACKEND": "common.staticfiles.StaticStorage"},
}
# Serve straight from the finders when collectstatic has not run (dev, tests).
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = DEBUG

# Production behind TLS: secure cookies unless explicitly turned off for plain-HTTP setups.
SECURE_TLS = envbool("ARGUS_SECURE_TLS", False)
SESSION_COOKIE_SECURE = SECURE_TLS
CSRF_COOKIE_SECURE = SECURE_TLS
if SECURE_TLS:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_HSTS_SECONDS = envseconds("ARGUS_HSTS_S", "0")
SECURE_CONTENT_TYPE_NOSNIFF = True
# Sent by common.csp on every response. The pages load scripts and styles from this origin
# only (static/, vendored, no CDN) and hold no inline script, inline style or style attribute,
# so the policy is strict without nonces: an injected <script> or onerror= does not run.
# Pico's icons and Swagger UI's are data: images.
ARGUS_CSP = envstr(
    "ARGUS_CSP",
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; font-src 'self'; "
    "connect-src 'self'; object-src 'none'; base-uri 'self'; form-action 'self'; frame-ancestors 'none'",
)
X_FRAME_OPTIONS = "DENY"

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "accounts.auth.BearerTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    # JSON only (the task and file routes add their own): forms would take `expires_at=` as
    # null and `is_admin=1` as true, which the schema's JSON types do not allow.
    "DEFAULT_PARSER_CLASSES": ["common.parsers.JSONParser"],
    "DEFAULT_PAGINATION_CLASS": "common.api.Pagination",
    "PAGE_SIZE": 50,
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "DEFAULT_SCHEMA_CLASS": "common.schema.AutoSchema",
    "EXCEPTION_HANDLER": "common.api.exception_handler",
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Argus API",
    "DESCRIPTION": "Training jobs (verl PPO, GRPO, SFT) on a shared Ray GPU cluster.",
    "VERSION": "2",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    # Operation ids and tags (common.schema.AutoSchema) start after it: `tasks_list`, not `v2_…`.
    "SCHEMA_PATH_PREFIX": r"/api/v2",
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        # Before the errors: it reads a parameter's type, which a oneOf hides.
        "common.schema.merge_blank_branches",
        "common.api.document_common_errors",
    ],
    # Tasks and tokens both have a `state`: name their enums instead of "State39eEnum".
    "ENUM_NAME_OVERRIDES": {
        "TaskStateEnum": "tasks.choices.TaskState",
        "PipelineStateEnum": "tasks.choices.PipelineState",
        "TokenStateEnum": "accounts.models.TokenState",
        "TaskKindEnum": "tasks.choices.TaskKind",
        "EventKindEnum": "tasks.choices.EventKind",
        "WebhookEventEnum": "webhooks.models.WebhookEvent",
        "SweepModeEnum": "tasks.sweeps.models.Mode",
    },
}

# --- Argus --------------------------------------------------------------------------------
ARGUS_SHARED_ROOT = Path(envstr("ARGUS_SHARED_ROOT", str(BASE_DIR / "var" / "private")))
# SFTP (manage.py sftpd): each user's home as `/`, the shared folders read-only under common/.
ARGUS_SFTP_PORT = envint("ARGUS_SFTP_PORT", 2222)
# The server's host key, made on its first start and kept, so clients never see it change:
# on the service's own storage (beside the database), not on the shared storage jobs can read.
ARGUS_SFTP_HOST_KEY = Path(envstr("ARGUS_SFTP_HOST_KEY", str(BASE_DIR / "var" / "sftp_host_key")))
ARGUS_CLUSTER_NAME = envstr("ARGUS_CLUSTER_NAME", "argus-ray")
# verl's trainers (verl.trainer.*) and verl 0.9's experimental ones, each module by its name.
ARGUS_ADVANCED_ALLOWED_MODULES = envlist(
    "ARGUS_ADVANCED_ALLOWED_MODULES",
    "verl.trainer.,verl.experimental.fully_async_policy.fully_async_main,verl.experimental.one_step_off_policy.main_ppo",
)
ARGUS_MAX_SPEC_BYTES = 64 * 1024
# A token's last_used_at is written at most this often, so every API call is not a write.
ARGUS_TOKEN_TOUCH_S = envint("ARGUS_TOKEN_TOUCH_S", 60)

# Ray: explicit addresses win; otherwise the fresh head.json of ARGUS_CLUSTER_NAME.
ARGUS_RAY_JOB_SERVER_URL = envstr("ARGUS_RAY_JOB_SERVER_URL", "")
ARGUS_RAY_GCS_ADDRESS = envstr("ARGUS_RAY_GCS_ADDRESS", "")
ARGUS_RAY_TIMEOUT_S = envfloat("ARGUS_RAY_TIMEOUT_S", 5.0)
# The cluster's Ray token (raypool/raytoken.py): empty, the file beside head.json. Argus sends it
# to Ray when the file is there, and sends none when it is not (a cluster without tokens).
ARGUS_RAY_TOKEN_FILE = envstr("ARGUS_RAY_TOKEN_FILE", "")
# A submission can take longer than a status call on a busy head; a timeout there only leaves
# the task SUBMITTING for the next sync to settle, but each one costs a tick.
ARGUS_RAY_SUBMIT_TIMEOUT_S = envfloat("ARGUS_RAY_SUBMIT_TIMEOUT_S", 30.0)

# Scheduler
ARGUS_TICK_S = envfloat("ARGUS_TICK_S", 2.0)
# The ticker renews its lease every pass; a crashed one blocks the next for at most this long.
ARGUS_TICK_LEASE_S = envint("ARGUS_TICK_LEASE_S", 90)
# A tick stops starting work after this long (each submission may wait on Ray), well under the
# lease and django-q2's timeout; what it did not reach waits for the next tick.
ARGUS_TICK_BUDGET_S = envfloat("ARGUS_TICK_BUDGET_S", 30.0)
# A task whose turn in a tick raises this many times in a row fails alone (tasks/scheduler/turns.py).
ARGUS_SCHEDULER_ERROR_LIMIT = envint("ARGUS_SCHEDULER_ERROR_LIMIT", 3)
# How often the scheduler reads Ray's whole job table (orphans, retention, foreign jobs).
ARGUS_RAY_SWEEP_S = envfloat("ARGUS_RAY_SWEEP_S", 5.0)
# Every finished Argus job is deleted from Ray this long after its end, driver.log or not
# (tasks/scheduler/sweep.py): Ray's job table holds each job's runtime_env, the task's secrets
# among its env_vars, for anyone with the cluster's token. Argus reads nothing of an ended job from
# Ray; five minutes leave an admin time to look at one in Ray's dashboard.
ARGUS_RAY_JOB_RETENTION_S = envint("ARGUS_RAY_JOB_RETENTION_S", 300)
ARGUS_RETRY_INTERVAL_S = envint("ARGUS_RETRY_INTERVAL_S", 60)
ARGUS_RETRY_MAX_INTERVAL_S = envint("ARGUS_RETRY_MAX_INTERVAL_S", 600)
ARGUS_LOST_RETRIES = envint("ARGUS_LOST_RETRIES", 3)
# A task whose attempt ended because a node died goes back to the queue in its place, this many
# times (not counted against its max_retries); then it fails, naming the node(s).
ARGUS_NODE_FAILURE_RETRIES = envint("ARGUS_NODE_FAILURE_RETRIES", 3)
# A job that failed on Ray's lost-work exceptions (ActorUnavailableError, ActorDiedError…) with no
# node of it dead yet is judged only this long after its end: Ray's health checks may still be
# about to declare the node dead (Ray's defaults take tens of seconds).
ARGUS_NODE_DEATH_WAIT_S = envint("ARGUS_NODE_DEATH_WAIT_S", 45)
# A stop Ray was asked for but did not accept (a timeout) is sent again after this long.
ARGUS_STOP_RESEND_S = envint("ARGUS_STOP_RESEND_S", 30)
# Every file call the tick makes on shared storage is bounded by this (a slow NFS must not hold
# the tick past its lease); a call that overruns is a storage condition.
ARGUS_STORAGE_TIMEOUT_S = envfloat("ARGUS_STORAGE_TIMEOUT_S", 5.0)
ARGUS_MAX_RUNNING_TASKS = envint("ARGUS_MAX_RUNNING_TASKS", 0)
# backfill (EASY backfill, the default), strict_fifo or best_effort_fifo: tasks/scheduler/admission.py.
ARGUS_SCHEDULING_POLICY = envstr("ARGUS_SCHEDULING_POLICY", "backfill")
if ARGUS_SCHEDULING_POLICY not in ("backfill", "strict_fifo", "best_effort_fifo"):
    raise ImproperlyConfigured(
        f"ARGUS_SCHEDULING_POLICY={ARGUS_SCHEDULING_POLICY!r}: use backfill, strict_fifo or best_effort_fifo"
    )
# Backfill: once the first blocked task has its reservation, try the others shortest time
# limit first (false: in queue order, as Slurm's EASY backfill does).
ARGUS_BACKFILL_SHORTEST_FIRST = envbool("ARGUS_BACKFILL_SHORTEST_FIRST", True)
# Fair share (tasks/queue/fairshare.py): usage is GPU-seconds halved every HALF_LIFE_S; a
# light user's task may pass a heavy user's that came up to WINDOW earlier (0: off).
ARGUS_FAIR_SHARE_HALF_LIFE_S = envseconds("ARGUS_FAIR_SHARE_HALF_LIFE_S", "168h")
ARGUS_FAIR_SHARE_WINDOW_S = envseconds("ARGUS_FAIR_SHARE_WINDOW_S", "2h")
# Preemption: a task that cannot start may stop preemptible tasks of lower priority; each gets
# this long to finish a checkpoint save before its Ray job is stopped.
ARGUS_PREEMPTION = envbool("ARGUS_PREEMPTION", True)
ARGUS_PREEMPT_GRACE_S = envint("ARGUS_PREEMPT_GRACE_S", 120)
# A task that resumed after a preemption or a reclaim is not chosen again before it has run this long.
ARGUS_PREEMPT_MIN_RUN_S = envint("ARGUS_PREEMPT_MIN_RUN_S", 600)
# A borrowed task chosen to give its room back runs on until its next checkpoint when that is
# due within this long (from the time between its last two), else it stops at once.
ARGUS_RECLAIM_GRACE_S = envint("ARGUS_RECLAIM_GRACE_S", 300)
# Checkpoints a task keeps (spec key keep_checkpoints, where the spec leaves it out): its latest
# complete global_step_N folders; older ones are deleted (tasks.checkpoints). 0: keep all.
ARGUS_KEEP_CHECKPOINTS = envint("ARGUS_KEEP_CHECKPOINTS", 3)
# How often the tick prunes the checkpoints of running tasks (and of tasks that just ended).
ARGUS_CHECKPOINT_PRUNE_S = envint("ARGUS_CHECKPOINT_PRUNE_S", 30)
# The disk-usage scan (accounts.diskusage.scan, a django-q2 job every 5 minutes, off the tick)
# starts no new user's home past this many seconds; under django-q2's timeout (120 s).
ARGUS_DISK_SCAN_BUDGET_S = envint("ARGUS_DISK_SCAN_BUDGET_S", 60)
# Estimated starts are planned for this many waiting tasks at the head of the queue each tick.
ARGUS_ESTIMATE_DEPTH = envint("ARGUS_ESTIMATE_DEPTH", 200)
ARGUS_MAX_TASK_GPUS = envint("ARGUS_MAX_TASK_GPUS", 0)
# The most trials one sweep document may make (tasks.sweeps.document): every one is a task.
ARGUS_SWEEP_MAX_TRIALS = envint("ARGUS_SWEEP_MAX_TRIALS", 256)
# Per-user limits where a user's own (accounts.UserLimits, set in the admin site or by PATCH
# /api/v2/users/<name>) is empty; 0: no limit. A submission past the queued limit is refused
# (429); the running ones are the scheduler's to apply (accounts.limits.limits_by_user).
ARGUS_USER_MAX_RUNNING_GPUS = envint("ARGUS_USER_MAX_RUNNING_GPUS", 0)
ARGUS_USER_MAX_RUNNING_TASKS = envint("ARGUS_USER_MAX_RUNNING_TASKS", 0)
ARGUS_USER_MAX_QUEUED_TASKS = envint("ARGUS_USER_MAX_QUEUED_TASKS", 0)
# verl asks one {"CPU": 3, "GPU": 1} bundle per GPU: admission checks that many CPUs per GPU on
# each node (0 turns the CPU check off).
ARGUS_CPUS_PER_GPU = envfloat("ARGUS_CPUS_PER_GPU", 3.0)
# An export (verl's model merger, no GPU) is fitted by CPUs on one worker node, and asks Ray for them.
ARGUS_EXPORT_CPUS = envfloat("ARGUS_EXPORT_CPUS", 4.0)
# Time limits and hang detection (seconds, or durations like 90m / 12h; 0: none). A spec's
# time_limit defaults to ARGUS_DEFAULT_TIME_LIMIT_S and is capped by ARGUS_MAX_TIME_LIMIT_S; its
# stall_timeout (driver.log silent that long: the attempt is stopped as STALLED) defaults to
# ARGUS_STALL_TIMEOUT_S.
ARGUS_DEFAULT_TIME_LIMIT_S = envseconds("ARGUS_DEFAULT_TIME_LIMIT_S", "0")
ARGUS_MAX_TIME_LIMIT_S = envseconds("ARGUS_MAX_TIME_LIMIT_S", "0")
ARGUS_STALL_TIMEOUT_S = envseconds("ARGUS_STALL_TIMEOUT_S", "30m")
# A running attempt whose placement Ray reports it cannot satisfy for this long is stopped and
# requeued as a shortage (verl would wait for it for ever).
ARGUS_PLACEMENT_GRACE_S = envint("ARGUS_PLACEMENT_GRACE_S", 60)

# Files page / API
ARGUS_MAX_UPLOAD_BYTES = envint("ARGUS_MAX_UPLOAD_BYTES", 1024 * 1024 * 1024)
DATA_UPLOAD_MAX_MEMORY_SIZE = 2 * 1024 * 1024

# Webhooks (webhooks/): signed POSTs when a task ends. Links in them point at ARGUS_PUBLIC_URL.
ARGUS_PUBLIC_URL = envstr("ARGUS_PUBLIC_URL", "http://127.0.0.1:8000").rstrip("/")
# Hosts a webhook may reach although they resolve to loopback, private or link-local addresses.
ARGUS_WEBHOOK_ALLOWED_HOSTS = [host.lower() for host in envlist("ARGUS_WEBHOOK_ALLOWED_HOSTS", "")]
# One try's whole time, name lookup to the answer's headers (webhooks.deadline), not each read.
ARGUS_WEBHOOK_TIMEOUT_S = envfloat("ARGUS_WEBHOOK_TIMEOUT_S", 10.0)
# Tries the webhook worker (manage.py sendwebhooks) runs at once; one user gets at most half.
ARGUS_WEBHOOK_THREADS = envint("ARGUS_WEBHOOK_THREADS", 4)
# Tries in all (the first at once), and the wait before the second, doubling after each failure.
ARGUS_WEBHOOK_MAX_ATTEMPTS = envint("ARGUS_WEBHOOK_MAX_ATTEMPTS", 5)
ARGUS_WEBHOOK_RETRY_S = envint("ARGUS_WEBHOOK_RETRY_S", 60)
# Finished deliveries are shown this long, then deleted.
ARGUS_WEBHOOK_KEEP_S = envseconds("ARGUS_WEBHOOK_KEEP_S", "30d")

# django-q2 runs the scheduling tick and the Ray sync, and nothing else: webhooks have their
# own worker, so a user's receiver can never hold a worker the tick needs. The ORM broker
# keeps it to one database; poll 0.2 s keeps the on-commit trigger fast (RAY_NOTES.md).
# timeout < retry, and max_attempts bounds re-delivery of a task that keeps failing.
Q_CLUSTER = {
    "name": "argus",
    "orm": "default",
    "workers": envint("ARGUS_Q_WORKERS", 2),
    "poll": 0.2,
    "timeout": 120,
    "retry": 180,
    "max_attempts": 1,
    "catch_up": False,
    "ack_failures": True,
    "save_limit": 200,
    "label": "Scheduler queue",
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "json": {"()": "common.jsonlog.JsonFormatter"},
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"},
    },
    "handlers": {
        # stderr by default, so that commands whose output is data (argus_token issue) keep
        # stdout clean; the web service and the scheduler run with ARGUS_LOG_STREAM=stdout.
        "console": {
            "class": "logging.StreamHandler",
            "stream": "ext://sys.stdout" if envstr("ARGUS_LOG_STREAM", "stderr") == "stdout" else "ext://sys.stderr",
            "formatter": envstr("ARGUS_LOG_FORMAT", "json"),
        }
    },
    "root": {"handlers": ["console"], "level": envstr("ARGUS_LOG_LEVEL", "INFO")},
    "loggers": {"django.db.backends": {"level": "WARNING"}},
}
