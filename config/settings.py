"""Settings, read from the environment once at start-up.

Every knob has a safe local default so that `make run` works on a new machine with no
configuration; production sets them through the environment (see README, "Configuration").
"""

import os
import re
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent


def env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return default
    try:
        return int(value)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} must be an integer, got {value!r}") from exc


def env_float(name: str, default: float) -> float:
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return default
    try:
        number = float(value)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} must be a number, got {value!r}") from exc
    if number != number or number in (float("inf"), float("-inf")):
        raise ImproperlyConfigured(f"{name} must be a finite number, got {value!r}")
    return number


def env_list(name: str, default: list[str]) -> list[str]:
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return default
    return [item.strip() for item in value.split(",") if item.strip()]


# ------------------------------------------------------------------------------
# Core
# ------------------------------------------------------------------------------
DEVELOPMENT_SECRET_KEY = "django-insecure-development-only-key-do-not-use-in-production"
DEBUG = env_bool("DJANGO_DEBUG", False)
SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", DEVELOPMENT_SECRET_KEY)
# The development key is public; a service that is not in debug mode must not run with it.
# Management commands that never serve requests (tests, migrations, collectstatic) may.
ALLOW_DEVELOPMENT_SECRET_KEY = env_bool("DJANGO_ALLOW_DEVELOPMENT_SECRET_KEY", False)
if SECRET_KEY == DEVELOPMENT_SECRET_KEY and not DEBUG and not ALLOW_DEVELOPMENT_SECRET_KEY:
    raise ImproperlyConfigured(
        "DJANGO_SECRET_KEY is not set. Set it to a long random value, "
        "or set DJANGO_DEBUG=true for local development."
    )

ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = env_list("DJANGO_CSRF_TRUSTED_ORIGINS", [])
# A refused form post is JSON outside the admin (decisions.md, "Error bodies").
CSRF_FAILURE_VIEW = "config.views.csrf_failure"

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
# A trailing slash answers the same as none; a redirect would lose a POST body.
APPEND_SLASH = False

# ------------------------------------------------------------------------------
# Applications
# ------------------------------------------------------------------------------
INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework_api_key",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "core",
    "catalog",
    "stock",
    "sync",
    "orders",
    "plants",
    "partner_api",
    "monitoring",
]

MIDDLEWARE = [
    "config.middleware.LargeBodyGcPauseMiddleware",
    "config.middleware.RequestIdMiddleware",
    "monitoring.middleware.HttpMetricsMiddleware",
    "partner_api.middleware.RequestLogMiddleware",
    "config.middleware.RequestBodyMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "config.middleware.AdminNulFilterMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

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

# ------------------------------------------------------------------------------
# Database
# ------------------------------------------------------------------------------
# SQLite (a file in the project folder) when DATABASE_URL is unset; PostgreSQL in production.
SQLITE_PATH = os.environ.get("SQLITE_PATH", str(BASE_DIR / "db.sqlite3"))
DATABASES = {
    "default": dj_database_url.parse(
        os.environ.get("DATABASE_URL") or f"sqlite:///{SQLITE_PATH}",
        conn_max_age=env_int("DATABASE_CONN_MAX_AGE", 60),
        conn_health_checks=True,
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Several writers (gunicorn workers, the admin, commands) share one file: WAL lets readers
    # run beside a writer, IMMEDIATE takes the write lock at BEGIN so two transactions never
    # deadlock on a lock upgrade, and the busy timeout makes a writer wait instead of failing.
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    DATABASES["default"]["OPTIONS"] = {
        "transaction_mode": "IMMEDIATE",
        "timeout": 30,
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA busy_timeout=30000;",
    }
    DATABASES["default"]["TEST"] = {"NAME": os.environ.get("SQLITE_TEST_PATH") or None}
else:
    DATABASES["default"].setdefault("OPTIONS", {})
    DATABASES["default"]["OPTIONS"].setdefault(
        "connect_timeout", env_int("DATABASE_CONNECT_TIMEOUT", 5)
    )
    # psycopg prepares a statement bound on the server once it has run 5 times on a connection
    # (`core.bulk.prepared_cursor`; Django's own cursors bind on the client, never prepared).
    DATABASES["default"]["OPTIONS"].setdefault("prepare_threshold", 5)
    # Behind pgbouncer in transaction pooling mode (docs/DEPLOYMENT.md), consecutive
    # transactions of one connection may run on different server sessions: nothing may outlive
    # a transaction there. No server-side cursors (they are held across transactions) and no
    # prepared statements (they live in one session only).
    if env_bool("DATABASE_TRANSACTION_POOLING", False):
        DATABASES["default"]["DISABLE_SERVER_SIDE_CURSORS"] = True
        DATABASES["default"]["OPTIONS"]["prepare_threshold"] = None

# ------------------------------------------------------------------------------
# Authentication
# ------------------------------------------------------------------------------
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "admin:login"

# ------------------------------------------------------------------------------
# Internationalisation
# ------------------------------------------------------------------------------
LANGUAGE_CODE = "en-us"
TIME_ZONE = os.environ.get("TIME_ZONE", "UTC")
USE_I18N = True
USE_TZ = True
# One time format in the admin, with seconds and the zone (config/formats/en/formats.py).
FORMAT_MODULE_PATH = ["config.formats"]

# ------------------------------------------------------------------------------
# Static files (served by the app through WhiteNoise: admin and Swagger UI work offline)
# ------------------------------------------------------------------------------
STATIC_URL = "static/"
STATIC_ROOT = Path(os.environ.get("DJANGO_STATIC_ROOT", str(BASE_DIR / "staticfiles")))
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"
        if not DEBUG
        else "django.contrib.staticfiles.storage.StaticFilesStorage"
    },
}
WHITENOISE_USE_FINDERS = True

# ------------------------------------------------------------------------------
# Request size
# ------------------------------------------------------------------------------
# 5000 fully populated items are about 3 MB; the longest legal items are about 2.5 kB each.
# Django's default of 2.5 MB would refuse a legal batch.
MAX_REQUEST_BODY_BYTES = env_int("MAX_REQUEST_BODY_BYTES", 16 * 1024 * 1024)
DATA_UPLOAD_MAX_MEMORY_SIZE = MAX_REQUEST_BODY_BYTES
DATA_UPLOAD_MAX_NUMBER_FIELDS = 10_000

# ------------------------------------------------------------------------------
# Synchronization
# ------------------------------------------------------------------------------
SYNC_MAX_ITEMS = env_int("SYNC_MAX_ITEMS", 5000)
CATALOG_SYNC_MAX_ITEMS = env_int("CATALOG_SYNC_MAX_ITEMS", 5000)
# Units of every product never offered for sale, unless the product sets its own buffer.
STOCK_SAFETY_BUFFER = env_int("STOCK_SAFETY_BUFFER", 0)
# The warehouse whose code this is holds stock sent without a warehouse (created by migrate).
DEFAULT_WAREHOUSE = os.environ.get("DEFAULT_WAREHOUSE", "").strip() or "MAIN"
if STOCK_SAFETY_BUFFER < 0:
    raise ImproperlyConfigured(f"STOCK_SAFETY_BUFFER must be 0 or more, got {STOCK_SAFETY_BUFFER}")
IDEMPOTENCY_RETENTION_HOURS = env_int("IDEMPOTENCY_RETENTION_HOURS", 24)

# Full snapshots (docs/API.md, "Full snapshots"): how long one stays open, and the guard that
# holds a commit which looks wrong until a person confirms the absent count.
SNAPSHOT_TTL_HOURS = env_int("SNAPSHOT_TTL_HOURS", 24)
SNAPSHOT_MAX_ABSENT_SHARE = env_float("SNAPSHOT_MAX_ABSENT_SHARE", 0.1)
SNAPSHOT_ABSENT_ALLOWED = env_int("SNAPSHOT_ABSENT_ALLOWED", 0)
SNAPSHOT_MAX_SHRINK = env_float("SNAPSHOT_MAX_SHRINK", 0.2)
for _name in ("SNAPSHOT_TTL_HOURS", "SNAPSHOT_ABSENT_ALLOWED"):
    if globals()[_name] < 0:
        raise ImproperlyConfigured(f"{_name} must be 0 or more, got {globals()[_name]}")
for _name in ("SNAPSHOT_MAX_ABSENT_SHARE", "SNAPSHOT_MAX_SHRINK"):
    if not 0 <= globals()[_name] <= 1:
        raise ImproperlyConfigured(f"{_name} must be between 0 and 1, got {globals()[_name]}")

# ------------------------------------------------------------------------------
# Metrics (GET /metrics, see monitoring/): 404 while unset, a bearer token when set
# ------------------------------------------------------------------------------
METRICS_TOKEN = os.environ.get("METRICS_TOKEN", "").strip()

# ------------------------------------------------------------------------------
# Django REST framework and OpenAPI
# ------------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["partner_api.authentication.ApiKeyAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PARSER_CLASSES": ["partner_api.parsers.StrictJSONParser"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "EXCEPTION_HANDLER": "partner_api.exceptions.exception_handler",
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "UNAUTHENTICATED_USER": None,
    "DEFAULT_THROTTLE_CLASSES": ["partner_api.throttling.ApiKeyRateThrottle"],
}
# Per-key throttling, off when unset: "<requests>/<s|min|hour|day>", e.g. "600/min".
API_KEY_THROTTLE_RATE = os.environ.get("API_KEY_THROTTLE_RATE", "").strip() or None
if API_KEY_THROTTLE_RATE and not re.fullmatch(
    r"[1-9][0-9]*/(s|sec|m|min|h|hour|d|day)", API_KEY_THROTTLE_RATE
):
    raise ImproperlyConfigured(
        f"API_KEY_THROTTLE_RATE must look like '600/min', got {API_KEY_THROTTLE_RATE!r}"
    )

# Requests with an invalid X-API-Key, per client address (partner_api.authentication).
AUTH_FAILURE_RATE = os.environ.get("AUTH_FAILURE_RATE", "").strip() or "600/min"
if AUTH_FAILURE_RATE != "off" and not re.fullmatch(
    r"[1-9][0-9]*/(s|sec|m|min|h|hour|d|day)", AUTH_FAILURE_RATE
):
    raise ImproperlyConfigured(
        f"AUTH_FAILURE_RATE must look like '600/min' or be 'off', got {AUTH_FAILURE_RATE!r}"
    )

# ------------------------------------------------------------------------------
# Cache (throttling counters)
# ------------------------------------------------------------------------------
# Local memory when CACHE_URL is unset: each worker process counts on its own. Several workers
# or app servers share counters through the database ("db://<table>", after
# `manage.py createcachetable`) or Redis ("redis://host:6379/0", needs the redis package).
CACHE_URL = os.environ.get("CACHE_URL", "").strip()
if not CACHE_URL or CACHE_URL.startswith("locmem://"):
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
elif CACHE_URL.startswith("db://"):
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.db.DatabaseCache",
            "LOCATION": CACHE_URL.removeprefix("db://") or "django_cache",
        }
    }
elif CACHE_URL.startswith(("redis://", "rediss://")):
    CACHES = {
        "default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": CACHE_URL}
    }
else:
    raise ImproperlyConfigured("CACHE_URL must start with locmem://, db:// or redis://")

SPECTACULAR_SETTINGS = {
    "TITLE": "Stock synchronization and order exchange",
    "DESCRIPTION": (
        "Keeps the shop's stock and prices in step with the partner system (ERP) and hands "
        "the shop's orders to it; the shop places its orders through it and reads what it "
        "can sell. Every operation needs the `X-API-Key` header: a partner key for the "
        "partner system's operations, a shop key for the shop's (tag `shop`)."
    ),
    "TAGS": [
        {"name": "products", "description": "The partner system's stock and prices (partner key)."},
        {"name": "orders", "description": "The orders feed and acknowledgements (partner key)."},
        {"name": "plants", "description": "Plants (partner key)."},
        {
            "name": "shop",
            "description": (
                "What the shop can sell, and its orders: placed, read and cancelled "
                "(shop key, `create_api_key NAME --scope shop`)."
            ),
        },
    ],
    "VERSION": "1.0.0",
    "LICENSE": {"name": "Proprietary", "identifier": "LicenseRef-Proprietary"},
    "OAS_VERSION": "3.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    "SCHEMA_PATH_PREFIX": r"/api/v[0-9]+",
    "PREPROCESSING_HOOKS": ["partner_api.schema_extensions.canonical_paths"],
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "partner_api.schema_extensions.this_server",
        "partner_api.documented_times.stamp_document_time",
    ],
}

# ------------------------------------------------------------------------------
# Security (production)
# ------------------------------------------------------------------------------
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
SESSION_COOKIE_HTTPONLY = True
SECURE_SSL_REDIRECT = env_bool("DJANGO_SECURE_SSL_REDIRECT", False)
SESSION_COOKIE_SECURE = env_bool("DJANGO_SESSION_COOKIE_SECURE", False)
CSRF_COOKIE_SECURE = env_bool("DJANGO_CSRF_COOKIE_SECURE", False)
SECURE_HSTS_SECONDS = env_int("DJANGO_SECURE_HSTS_SECONDS", 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_HSTS_PRELOAD = env_bool("DJANGO_SECURE_HSTS_PRELOAD", False)
# A load balancer's plain-HTTP health check must not be redirected to HTTPS.
SECURE_REDIRECT_EXEMPT = [r"^healthz/?$"]
# Behind the documented reverse proxy: X-Forwarded-Proto and X-Forwarded-For are the proxy's.
BEHIND_PROXY = env_bool("DJANGO_BEHIND_PROXY", False)
if BEHIND_PROXY:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

# ------------------------------------------------------------------------------
# Logging: one line per request on stdout (see partner_api.middleware)
# ------------------------------------------------------------------------------
LOG_LEVEL = os.environ.get("LOG_LEVEL", "INFO").upper()
# "text" (the default, a readable line) or "json" (one JSON object per line, for log shippers).
LOG_FORMAT = os.environ.get("LOG_FORMAT", "text").strip().lower() or "text"
if LOG_FORMAT not in {"text", "json"}:
    raise ImproperlyConfigured(f"LOG_FORMAT must be text or json, got {LOG_FORMAT!r}")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "plain": {
            "()": "config.logging.OneLineFormatter",
            "format": "%(asctime)s %(levelname)s %(name)s [%(x_request_id)s] %(message)s",
        },
        "json": {"()": "monitoring.logs.JsonLineFormatter"},
    },
    "filters": {"request_context": {"()": "config.logging.RequestContextFilter"}},
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "formatter": "json" if LOG_FORMAT == "json" else "plain",
            "filters": ["request_context"],
        },
    },
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    "loggers": {
        "django.request": {"level": "ERROR"},
        # runserver's own access line would repeat the request's line (partner_api.middleware).
        "django.server": {"level": "CRITICAL"},
    },
}
