"""Django settings. Profile-dependent values come from `simulator.profiles.build_settings`."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from gambit.env import env_flag
from simulator.profiles import REPO_ROOT, build_settings

globals().update(build_settings(os.environ))
if TYPE_CHECKING:  # the names build_settings sets beyond Django's own, for the type checker
    GAMBIT_PROFILE: str
    GAMBIT_WORKSPACE: str
    GAMBIT_ACCESS_TOKEN: str
    GAMBIT_INPROCESS_WORKERS: int

BASE_DIR = REPO_ROOT
FEATURE_TEMPLATE_PACKAGES = ("web", "sessions", "grading", "building")

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "django_htmx",
    "django_tasks_db",
    "decks_app",
    "endpoint",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    # Unread messages appended to an htmx response as toasts (reads request.htmx on the way out).
    "decks_app.web.toasts.toasts",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "django.middleware.csp.ContentSecurityPolicyMiddleware",
    "decks_app.web.middleware.access_token",
    "decks_app.web.middleware.admin_needs_a_user",
    # Our error page for a 4xx a view raises, even with GAMBIT_DEBUG=1 (decks_app.web.errors).
    "decks_app.web.errors.friendly_errors",
]
# A form without its CSRF token gets one sentence, not Django's page about the setting.
CSRF_FAILURE_VIEW = "decks_app.web.errors.csrf_failure"

ROOT_URLCONF = "simulator.urls"
# Canonical page URLs have no trailing slash; the old ones with it redirect (decks_app.web.
# routes.without_trailing_slash), so Django must not add one to a path it cannot find.
APPEND_SLASH = False
ASGI_APPLICATION = "simulator.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        # Each feature package keeps its templates beside its views (decks_app/<feature>/templates).
        "DIRS": [BASE_DIR / "decks_app" / f / "templates" for f in FEATURE_TEMPLATE_PACKAGES],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "decks_app.web.shell.top_bar",
            ],
        },
    }
]

AUTH_PASSWORD_VALIDATORS: list[dict[str, str]] = []
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Request bodies are size-limited (docs/simulator.md, "Security defaults"): imports of states
# and traces up to 10 MB.
DATA_UPLOAD_MAX_MEMORY_SIZE = 10 * 1024 * 1024
FILE_UPLOAD_MAX_MEMORY_SIZE = 10 * 1024 * 1024

X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True

# Content-Security-Policy (Django's own middleware): scripts only from our static files, no
# inline script and no eval (htmx runs with allowEval off, see base.html); inline styles
# stay allowed because CodeMirror and Chart.js set them. Websockets to this origin only.
from django.utils.csp import CSP  # noqa: E402

SECURE_CSP = {
    "default-src": [CSP.SELF],
    "script-src": [CSP.SELF],
    "style-src": [CSP.SELF, CSP.UNSAFE_INLINE],
    "img-src": [CSP.SELF, "data:"],
    "connect-src": [CSP.SELF],
    "object-src": [CSP.NONE],
    "base-uri": [CSP.NONE],
    "form-action": [CSP.SELF],
    "frame-ancestors": [CSP.NONE],
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {
        "decks_app": {"handlers": ["console"], "level": "INFO"},
        # every 500 is logged with its traceback (Django's default prints nothing here)
        "django.request": {"handlers": ["console"], "level": "ERROR", "propagate": False},
    },
}

# Legacy /v1/chat/completions (docs/endpoint.md): off unless enabled
# (`gambit serve --chat-completions`).
GAMBIT_CHAT_COMPLETIONS = env_flag(os.environ, "GAMBIT_CHAT_COMPLETIONS")

# Chat mode for every run of the server (the deck runs of the Test tab and of /v1), as the
# CLI's `GAMBIT_CHAT_FALLBACK=1` gives its runs (docs/providers.md).
GAMBIT_CHAT_FALLBACK = env_flag(os.environ, "GAMBIT_CHAT_FALLBACK")
