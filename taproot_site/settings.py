"""Taproot settings: one file, read from environment variables with safe local defaults."""

import os
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlsplit

import django_stubs_ext
from django.core.exceptions import ImproperlyConfigured
from django.utils.csp import CSP

from taproot_site.env import (
    DEFAULT_HOST,
    DEFAULT_POOL_SIZE,
    DEFAULT_POOL_TIMEOUT,
    DEFAULT_PORT,
    database_from_url,
    env_bool,
    env_choice,
    env_embedder,
    env_int,
    env_list,
    env_str,
    local_url,
)

# Recall's cosine scan (memories.recall.semantic) on one core: a worker serves one request per
# thread, and a BLAS that spreads each product over every core makes them wait on each
# other. Before numpy is first imported, which is after settings.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

# Lets typed code subscript Django's generic classes (ModelAdmin[Memory], ModelForm[…])
# at run time as the type checker reads them.
django_stubs_ext.monkeypatch()

BASE_DIR = Path(__file__).resolve().parent.parent

DEBUG = env_bool("DEBUG", True)

SECRET_KEY = env_str("SECRET_KEY")
_MAKE_A_KEY = "`python3 -c 'import secrets; print(secrets.token_urlsafe(50))'`"
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured(
            f"SECRET_KEY must be set when DEBUG is off: generate one with {_MAKE_A_KEY}."
        )
elif not DEBUG and ("change-me" in SECRET_KEY or len(SECRET_KEY) < 50):
    # The example file's placeholder, or a key short enough to guess: sessions, the
    # import ids and password resets all hang on it, on a server the internet reaches.
    raise ImproperlyConfigured(
        "SECRET_KEY is the example's placeholder or shorter than 50 characters, and DEBUG "
        f"is off: replace it with the output of {_MAKE_A_KEY}."
    )
if not SECRET_KEY:
    SECRET_KEY = "django-insecure-local-development-only-do-not-deploy"

# Unset, the public URL is where the run command listens (HOST, PORT), so that a server
# moved to another port still advertises itself, and manage.py commands given the same
# environment (issue_token) agree with it.
TAPROOT_PUBLIC_URL = (
    env_str("TAPROOT_PUBLIC_URL")
    or local_url(env_str("HOST", DEFAULT_HOST), env_int("PORT", DEFAULT_PORT, minimum=1))
).rstrip("/")
TAPROOT_MCP_URL = f"{TAPROOT_PUBLIC_URL}/mcp"
_public_hostname = urlsplit(TAPROOT_PUBLIC_URL).hostname or ""
_public_host = f"[{_public_hostname}]" if ":" in _public_hostname else _public_hostname

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", sorted({_public_host, "127.0.0.1", "localhost"}))

TAPROOT_ALLOW_LOOPBACK_CLIENTS = env_bool("TAPROOT_ALLOW_LOOPBACK_CLIENTS", DEBUG)
# Days an OAuth access token lasts (refresh tokens: 90 days unused).
TAPROOT_ACCESS_TOKEN_DAYS = env_int("TAPROOT_ACCESS_TOKEN_DAYS", 30, minimum=1)
# OAuth client registration (the oauth app): exact redirect URIs allowed besides
# Claude's callbacks; proxies whose X-Forwarded-For is believed; registrations per address.
TAPROOT_EXTRA_REDIRECT_URIS = env_list("TAPROOT_EXTRA_REDIRECT_URIS", [])
TAPROOT_TRUSTED_PROXIES = env_list("TAPROOT_TRUSTED_PROXIES", [])
TAPROOT_REGISTRATION_LIMIT = env_int("TAPROOT_REGISTRATION_LIMIT", 20, minimum=1)
TAPROOT_REGISTRATION_WINDOW_SECONDS = env_int(
    "TAPROOT_REGISTRATION_WINDOW_SECONDS", 3600, minimum=1
)
# Login throttling (django-axes, taproot_site.login): after this many failed logins for
# one account from one address, each within the lockout time of the one before, that
# account is refused from that address (429) until the lockout time has passed since the
# last failure. Addresses follow the registration limit's rule (TAPROOT_TRUSTED_PROXIES).
TAPROOT_LOGIN_FAILURE_LIMIT = env_int("TAPROOT_LOGIN_FAILURE_LIMIT", 10, minimum=1)
TAPROOT_LOGIN_LOCKOUT_MINUTES = env_int("TAPROOT_LOGIN_LOCKOUT_MINUTES", 15, minimum=1)
# /mcp against clients that hold the server up (mcp_bridge.admission): seconds a request
# body has to arrive whole (then 408); MiB of bodies each worker holds for requests not
# running yet (past it, 503; at least one body of the largest size, 4 MiB); requests one
# user (all their tokens) may have in progress at once in each worker, and seconds a
# request past that waits for its turn (then 429). None holds a database connection
# while it waits.
TAPROOT_MCP_BODY_TIMEOUT = env_int("TAPROOT_MCP_BODY_TIMEOUT", 10, minimum=1)
TAPROOT_MCP_BUFFER_MB = env_int("TAPROOT_MCP_BUFFER_MB", 64, minimum=4)
TAPROOT_MCP_REQUESTS_PER_USER = env_int("TAPROOT_MCP_REQUESTS_PER_USER", 8, minimum=1)
TAPROOT_MCP_QUEUE_TIMEOUT = env_int("TAPROOT_MCP_QUEUE_TIMEOUT", 10, minimum=0)
if "TAPROOT_MCP_REQUESTS_PER_TOKEN" in os.environ:
    raise ImproperlyConfigured(
        "TAPROOT_MCP_REQUESTS_PER_TOKEN is no longer read: the limit now counts all of a "
        "user's tokens together. Rename it TAPROOT_MCP_REQUESTS_PER_USER (default 8)."
    )
# Every other request at the edge (taproot_site.edge), before Django reads it: KiB a body
# may have (past it, 413, unread) and seconds it has to arrive (then 408). A POST to the
# dashboard's Import page from a signed-in account may send TAPROOT_IMPORT_MAX_MB within
# TAPROOT_IMPORT_BODY_TIMEOUT seconds instead, one at a time per account.
TAPROOT_MAX_BODY_KB = env_int("TAPROOT_MAX_BODY_KB", 1024, minimum=64)
TAPROOT_BODY_TIMEOUT = env_int("TAPROOT_BODY_TIMEOUT", 10, minimum=1)
TAPROOT_IMPORT_BODY_TIMEOUT = env_int("TAPROOT_IMPORT_BODY_TIMEOUT", 300, minimum=1)
# An optional cap on the reflect catalog: lower-salience memories untouched this many days
# are left out of it. 0 (the default) leaves it off, and the token budget alone decides.
CATALOG_WINDOW_DAYS = env_int("CATALOG_WINDOW_DAYS", 0, minimum=0)
# The reflect payload never passes this many tokens; below 2,000 its fixed parts (the notes,
# the counts) might not fit.
REFLECT_MAX_TOKENS = env_int("REFLECT_MAX_TOKENS", 8000, minimum=2000)
# remember and recall replies ask Claude to call taproot_reflect when it has not for this long.
TAPROOT_REFLECT_NUDGE_HOURS = env_int("TAPROOT_REFLECT_NUDGE_HOURS", 12, minimum=1)
# A remember or close that repeats one the account made this many minutes ago is Claude
# retrying a call it saw fail: it returns what was stored instead of storing again. 0: off.
TAPROOT_RETRY_WINDOW_MINUTES = env_int("TAPROOT_RETRY_WINDOW_MINUTES", 10, minimum=0)

# The recall relevance profile (SPEC §3.1): "taproot" weighs query words by how rare they
# are; "seed" is the original rule. The index is built for one of them: after a change,
# run `manage.py reindex_taproot`.
TAPROOT_RANKING = env_choice("TAPROOT_RANKING", "taproot", ("taproot", "seed"))
# Recall by meaning (SPEC §3.2, issue 25): "wordllama" (a small local model shipped inside
# its package) blends a semantic signal into the taproot profile's relevance; "minilm"
# (all-MiniLM-L6-v2, the minilm extra) and "onnx:PATH" (a sentence encoder exported to that
# folder) are stronger and dearer (memories.recall.onnx_embedding); "none" ranks by words alone.
TAPROOT_EMBEDDER = env_embedder("TAPROOT_EMBEDDER", "wordllama", ("wordllama", "minilm", "none"))
# MiB of memory vectors each worker keeps for the owners it served most recently (a
# 100,000-memory store takes about 125 with the default embedder); past it the least
# recently served owners are let go and read again at their next recall.
TAPROOT_VECTOR_CACHE_MB = env_int("TAPROOT_VECTOR_CACHE_MB", 256, minimum=16)
# MiB of words' postings each worker keeps, so that a recall of one word or several
# holding 1,000 postings or more in all finds its matches in the worker rather than in the
# database (memories.recall.postings); 0 keeps none.
TAPROOT_POSTINGS_CACHE_MB = env_int("TAPROOT_POSTINGS_CACHE_MB", 64, minimum=0)
# Whether a worker, as it starts, reads ahead the postings of the common words of the
# accounts holding a valid access token (memories.recall.warming).
TAPROOT_WARM_OWNERS = env_bool("TAPROOT_WARM_OWNERS", True)
# Overrides for the recall ranking constants of the active profile (see
# memories.recall.ranking.ActivationConfig).
TAPROOT_ACTIVATION: dict[str, object] = {}

# Import (manage.py import_taproot, the dashboard's Import page): a file (or the notes of
# a zip or folder) larger than this many megabytes is refused before it is read.
TAPROOT_IMPORT_MAX_MB = env_int("TAPROOT_IMPORT_MAX_MB", 64, minimum=1)
# Imports and dry runs one worker runs at once (each account runs one at a time anyway):
# each reads its file whole twice and checks every record, on a core of its own.
TAPROOT_IMPORTS_PER_WORKER = env_int("TAPROOT_IMPORTS_PER_WORKER", 2, minimum=1)

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "servestatic",
    "django.contrib.staticfiles",
    "django_htmx",
    "axes",
    "oauth2_provider",
    "oauth",
    "memories",
    "mcp_bridge",
    "dashboard",
]

MIDDLEWARE = [
    "taproot_site.busy.PoolTimeoutMiddleware",
    "oauth.requestlog.OAuthRequestLogMiddleware",
    "oauth.cors.LoopbackCorsMiddleware",
    "django.middleware.security.SecurityMiddleware",
    # Before anything reads the Host header: /healthz answers a probe on 127.0.0.1.
    "taproot_site.health.LoopbackHealthMiddleware",
    "django.middleware.csp.ContentSecurityPolicyMiddleware",
    "servestatic.middleware.ServeStaticMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # Before axes: an account guessed at from many addresses waits, whatever the address.
    "taproot_site.login.LoginSlowdownMiddleware",
    # Last, as django-axes asks: it turns a refused login into the lockout page.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "taproot_site.urls"

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

ASGI_APPLICATION = "taproot_site.asgi.application"

DATABASES = {
    "default": database_from_url(
        env_str("DATABASE_URL"),
        base_dir=BASE_DIR,
        pool_size=env_int("TAPROOT_DB_POOL_SIZE", DEFAULT_POOL_SIZE),
        pool_timeout=env_int("TAPROOT_DB_POOL_TIMEOUT", DEFAULT_POOL_TIMEOUT, minimum=1),
    )
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# The database cache is shared by every worker (registration throttling needs that).
CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.db.DatabaseCache",
        "LOCATION": "taproot_cache",
    }
}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

# axes first: a login it refuses never reaches the password check (no hash is computed).
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = TAPROOT_LOGIN_FAILURE_LIMIT
AXES_COOLOFF_TIME = timedelta(minutes=TAPROOT_LOGIN_LOCKOUT_MINUTES)
# Account and address together: an attacker cannot lock everyone out from behind a
# shared proxy, nor lock an account's owner out from where the owner is.
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_CLIENT_IP_CALLABLE = "taproot_site.login.client_address"
AXES_LOCKOUT_CALLABLE = "taproot_site.login.lockout_response"
AXES_HTTP_RESPONSE_CODE = 429
# Tries while locked out are refused without being counted, so the time the lockout
# page gives stays true; a successful login clears that account's count from there.
AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = False
AXES_RESET_ON_SUCCESS = True
# axes would otherwise keep a row for every successful login, for ever.
AXES_DISABLE_ACCESS_LOG = True

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "/dashboard/"
LOGOUT_REDIRECT_URL = "login"

# OAuth 2.1 authorization server for the /mcp resource (django-oauth-toolkit).
OAUTH2_PROVIDER = {
    "SCOPES": {"mcp": "Read and write your Taproot memories"},
    "DEFAULT_SCOPES": ["mcp"],
    "PKCE_REQUIRED": True,
    # Claude.ai often never refreshes a token: an hour would take the tools away mid-
    # conversation. Every request checks its token in the database, so revoking stays
    # immediate; refresh tokens still rotate.
    "ACCESS_TOKEN_EXPIRE_SECONDS": TAPROOT_ACCESS_TOKEN_DAYS * 24 * 3600,
    "ROTATE_REFRESH_TOKEN": True,
    "REFRESH_TOKEN_REUSE_PROTECTION": True,
    "OIDC_ISS_ENDPOINT": TAPROOT_PUBLIC_URL,
    "OAUTH2_PROTECTED_RESOURCE_IDENTIFIER": TAPROOT_MCP_URL,
    "OAUTH2_PROTECTED_RESOURCE_NAME": "Taproot",
    "OAUTH2_RESPONSE_TYPES_SUPPORTED": ["code"],
    "OAUTH2_GRANT_TYPES_SUPPORTED": ["authorization_code", "refresh_token"],
    "OAUTH2_TOKEN_ENDPOINT_AUTH_METHODS_SUPPORTED": [
        "client_secret_basic",
        "client_secret_post",
        "none",
    ],
    "REFRESH_TOKEN_EXPIRE_SECONDS": 60 * 60 * 24 * 90,  # after 90 days unused
    "OAUTH2_VALIDATOR_CLASS": "oauth.validators.TaprootOAuth2Validator",
    # http only for loopback clients (checked per URI at registration).
    "ALLOWED_REDIRECT_URI_SCHEMES": (
        ["https", "http"] if TAPROOT_ALLOW_LOOPBACK_CLIENTS else ["https"]
    ),
    "DCR_ENABLED": True,
    # Client ID Metadata Documents (oauth.cimd): a client named by the URL of its
    # description, as Claude names itself when this is advertised.
    "CIMD_ENABLED": True,
    "CIMD_METADATA_FETCHER": "oauth.cimd.Fetcher",
    "CIMD_FETCH_TIMEOUT_SECONDS": 5,
    "CIMD_MAX_DOCUMENT_SIZE": 8 * 1024,
    "DCR_REGISTRATION_PERMISSION_CLASSES": ("oauth.registration.RedirectAllowlistPermission",),
    "COMPLIANT_BCP_RFC9700_IMPLICIT_GRANT": True,
    "COMPLIANT_BCP_RFC9700_PASSWORD_GRANT": True,
    "COMPLIANT_BCP_RFC9700_PKCE_METHOD": True,
    "COMPLIANT_BCP_RFC9700_ACCESS_TOKEN_TRANSPORT": True,
    "COMPLIANT_BCP_RFC9700_AUTHZ_RESPONSE_ISS": True,
    "COMPLIANT_BCP_RFC9700_TOKEN_STORAGE": True,
    # Turn `check --deploy` warnings about these settings into errors should they regress.
    "COMPLIANT_BCP_RFC9700_REFRESH_TOKEN": True,
    "COMPLIANT_BCP_RFC9700_REDIRECT_URI_MATCHING": True,
    "COMPLIANT_BCP_RFC9700_PKCE_REQUIRED": True,
}

# django-oauth-toolkit's own models, named here because its models are swappable: a
# migration that points at them (the oauth app's) is written against these settings.
OAUTH2_PROVIDER_APPLICATION_MODEL = "oauth2_provider.Application"
OAUTH2_PROVIDER_ACCESS_TOKEN_MODEL = "oauth2_provider.AccessToken"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "/static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = BASE_DIR / "staticfiles"
# Serve straight from the source folders too, so a checkout works before collectstatic.
SERVESTATIC_USE_FINDERS = True
SERVESTATIC_AUTOREFRESH = DEBUG

# Whether a request came over HTTPS is the ASGI server's word (the request's scheme):
# scripts/serve's uvicorn takes X-Forwarded-Proto only from FORWARDED_ALLOW_IPS or
# TAPROOT_TRUSTED_PROXIES (taproot_site.server). Django's SECURE_PROXY_SSL_HEADER stays
# unset: it would believe that header from anyone who can reach the server.
SECURE_PROXY_SSL_HEADER = None
_https = TAPROOT_PUBLIC_URL.startswith("https://")
SESSION_COOKIE_SECURE = _https
CSRF_COOKIE_SECURE = _https
CSRF_TRUSTED_ORIGINS = [TAPROOT_PUBLIC_URL]
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
# Content-Security-Policy (Django's middleware): scripts, styles and images only from this
# site's own files; no inline script or style anywhere; no site may frame these pages.
# No form-action: Allow on the consent page redirects to the client (claude.ai), and
# browsers apply form-action to that redirect too.
SECURE_CSP = {
    "default-src": [CSP.SELF],
    "script-src": [CSP.SELF],
    "style-src": [CSP.SELF],
    "img-src": [CSP.SELF, "data:"],
    "object-src": [CSP.NONE],
    "base-uri": [CSP.NONE],
    "frame-ancestors": [CSP.NONE],
}
if _https and not DEBUG:
    SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", True)
    SECURE_REDIRECT_EXEMPT = [r"^healthz$"]
    SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 60 * 60 * 24 * 30)
    # Off unless asked for: both bind every subdomain of the public host to HTTPS (the
    # preload list for a long time), a choice for whoever runs the domain. `check
    # --deploy` warns about them (security.W005, security.W021); docs/connecting-claude.md
    # says why.
    SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", False)
    SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", False)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": "WARNING"},
    "loggers": {
        "taproot": {"handlers": ["console"], "level": "INFO", "propagate": False},
        # django-axes warns of every failed login, with the account and address masked;
        # taproot.login says which account was refused from where, once per refusal.
        "axes": {"level": "ERROR"},
    },
}
