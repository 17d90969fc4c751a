"""Tiny typed readers for configuration from environment variables."""

import os
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from django.core.exceptions import ImproperlyConfigured

TRUE_WORDS = {"1", "true", "yes", "on"}
FALSE_WORDS = {"0", "false", "no", "off", ""}


def settings_or_exit() -> None:
    """Read the settings now, so that an environment they refuse ends the process with
    their message, one line that says what to do, rather than a traceback."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "taproot_site.settings")
    from django.conf import settings

    try:
        settings.SECRET_KEY  # noqa: B018 - loading is the point
    except ImproperlyConfigured as error:
        raise SystemExit(str(error)) from None


def env_str(name: str, default: str = "") -> str:
    return os.environ.get(name, default).strip()


def env_choice(name: str, default: str, choices: tuple[str, ...]) -> str:
    value = env_str(name, default).lower()
    if value not in choices:
        raise ImproperlyConfigured(
            f"{name} must be one of {', '.join(choices)} (got {os.environ.get(name)!r})."
        )
    return value


def env_embedder(name: str, default: str, named: tuple[str, ...]) -> str:
    """One of the named embedders (any case), or `onnx:PATH`, its folder as given."""
    raw = env_str(name, default)
    if raw[:5].lower() == "onnx:" and raw[5:].strip():
        return "onnx:" + raw[5:].strip()
    if raw.lower() in named:
        return raw.lower()
    raise ImproperlyConfigured(
        f"{name} must be one of {', '.join(named)}, or onnx: followed by the folder of an "
        f"ONNX sentence encoder (got {os.environ.get(name)!r})."
    )


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in TRUE_WORDS:
        return True
    if value in FALSE_WORDS:
        return False
    raise ImproperlyConfigured(f"{name} must be 1 or 0 (got {raw!r}).")


def env_int(name: str, default: int, *, minimum: int = 0) -> int:
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a whole number (got {raw!r}).") from None
    if value < minimum:
        raise ImproperlyConfigured(f"{name} must be at least {minimum} (got {value}).")
    return value


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None:
        return list(default)
    return [item.strip() for item in raw.split(",") if item.strip()]


# Where the run command (scripts/serve) listens unless HOST and PORT say otherwise.
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
# Addresses that mean "every interface": a browser on this machine reaches them on loopback.
WILDCARD_HOSTS = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}


def local_url(host: str, port: int) -> str:
    """The URL a browser on this machine uses for a server listening on `host`:`port`."""
    host = WILDCARD_HOSTS.get(host, host)
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"http://{host}:{port}"


SQLITE_OPTIONS = {
    # Several requests (and uvicorn workers) write at once: WAL lets readers and one
    # writer proceed together, the busy timeout waits for the write lock instead of
    # failing, and IMMEDIATE takes that lock at BEGIN so a transaction never has to
    # upgrade a read lock mid-way (the classic source of "database is locked").
    "timeout": 30,
    "transaction_mode": "IMMEDIATE",
    "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON;",
}


# Connections each process keeps open to PostgreSQL (TAPROOT_DB_POOL_SIZE; 0: none).
DEFAULT_POOL_SIZE = 10
# Seconds a request waits for a pooled connection when all are lent out
# (TAPROOT_DB_POOL_TIMEOUT); then it is answered 503 with Retry-After.
DEFAULT_POOL_TIMEOUT = 5


def postgres_pool(size: int, timeout: int = DEFAULT_POOL_TIMEOUT) -> dict[str, Any]:
    # A connection idle for five minutes is closed. Each one is checked before it is
    # lent, so a connection the server dropped (a restart, an idle timeout) is replaced
    # instead of failing the request that borrows it. Imported here: psycopg takes a
    # tenth of a second of every process's start, which a SQLite store never needs.
    from psycopg_pool import ConnectionPool

    return {
        "min_size": 1,
        "max_size": size,
        "max_idle": 300,
        "timeout": timeout,
        "check": ConnectionPool.check_connection,
    }


def database_from_url(
    url: str, *, base_dir: Path, pool_size: int = 0, pool_timeout: int = DEFAULT_POOL_TIMEOUT
) -> dict[str, Any]:
    """Django DATABASES entry for `sqlite:///relative`, `sqlite:////absolute` or postgres URLs.

    For PostgreSQL, `pool_size` > 0 keeps up to that many connections open per process
    (psycopg's pool), so a request borrows one instead of opening its own, waiting at
    most `pool_timeout` seconds when all are lent out.
    """
    if not url:
        return {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": base_dir / "db.sqlite3",
            "OPTIONS": dict(SQLITE_OPTIONS),
        }
    parts = urlsplit(url)
    if parts.scheme == "sqlite":
        raw_path = url[len("sqlite://") :]
        if not raw_path.startswith("/") or raw_path == "/":
            raise ImproperlyConfigured(
                "DATABASE_URL for SQLite must look like sqlite:///relative/path.db "
                "or sqlite:////absolute/path.db."
            )
        # "/relative/path" or "//absolute/path": dropping one slash gives the path.
        path = Path(raw_path[1:])
        if not path.is_absolute():
            path = base_dir / path
        return {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": path,
            "OPTIONS": dict(SQLITE_OPTIONS),
        }
    if parts.scheme in {"postgres", "postgresql"}:
        name = unquote(parts.path.lstrip("/"))
        if not name:
            raise ImproperlyConfigured("DATABASE_URL for PostgreSQL must name a database.")
        return {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": name,
            "USER": unquote(parts.username or ""),
            "PASSWORD": unquote(parts.password or ""),
            "HOST": parts.hostname or "",
            "PORT": str(parts.port or ""),
            # Django's pool needs CONN_MAX_AGE 0: each request returns its connection.
            "CONN_MAX_AGE": 0,
            "OPTIONS": {"pool": postgres_pool(pool_size, pool_timeout)} if pool_size else {},
        }
    raise ImproperlyConfigured(
        f"DATABASE_URL scheme {parts.scheme!r} is not supported: use sqlite:///… or postgres://…"
    )
