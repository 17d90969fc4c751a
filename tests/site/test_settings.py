"""Settings come from environment variables with the defaults of SPEC §1 and §11, and
SQLite is set up so that simultaneous requests wait for each other instead of failing."""

import json
import os
import sqlite3
import subprocess
import sys

import pytest
from django.db import connection, transaction

from tests.live_server import ROOT

SPEC_VARIABLES = (
    "DATABASE_URL",
    "DEBUG",
    "SECRET_KEY",
    "ALLOWED_HOSTS",
    "CATALOG_WINDOW_DAYS",
    "REFLECT_MAX_TOKENS",
)

READ_SETTINGS = """
import json
from django.conf import settings
print(json.dumps({
    "DEBUG": settings.DEBUG,
    "SECRET_KEY": settings.SECRET_KEY,
    "TAPROOT_PUBLIC_URL": settings.TAPROOT_PUBLIC_URL,
    "TAPROOT_MCP_URL": settings.TAPROOT_MCP_URL,
    "ALLOWED_HOSTS": settings.ALLOWED_HOSTS,
    "TAPROOT_ALLOW_LOOPBACK_CLIENTS": settings.TAPROOT_ALLOW_LOOPBACK_CLIENTS,
    "CATALOG_WINDOW_DAYS": settings.CATALOG_WINDOW_DAYS,
    "REFLECT_MAX_TOKENS": settings.REFLECT_MAX_TOKENS,
    "TAPROOT_REFLECT_NUDGE_HOURS": settings.TAPROOT_REFLECT_NUDGE_HOURS,
    "DATABASE": str(settings.DATABASES["default"]["NAME"]),
    "ENGINE": settings.DATABASES["default"]["ENGINE"],
    "POOL": settings.DATABASES["default"].get("OPTIONS", {}).get("pool"),
    "TAPROOT_MCP_BODY_TIMEOUT": settings.TAPROOT_MCP_BODY_TIMEOUT,
    "TAPROOT_MCP_REQUESTS_PER_TOKEN": settings.TAPROOT_MCP_REQUESTS_PER_TOKEN,
}, default=lambda value: f"{value.__module__}.{value.__qualname__}"))
"""


def settings_with(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Load the settings in a fresh process that sees only `env` of the spec's variables."""
    clean = {
        k: v
        for k, v in os.environ.items()
        if k not in SPEC_VARIABLES and k not in {"HOST", "PORT"} and not k.startswith("TAPROOT_")
    }
    return subprocess.run(
        [sys.executable, "-c", READ_SETTINGS],
        cwd=ROOT,
        env={**clean, "DJANGO_SETTINGS_MODULE": "taproot_site.settings", **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def loaded(env: dict[str, str]) -> dict:
    result = settings_with(env)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_nothing_set_gives_safe_local_defaults():
    values = loaded({})
    assert values["DEBUG"] is True
    assert values["SECRET_KEY"]
    assert values["TAPROOT_PUBLIC_URL"] == "http://127.0.0.1:8000"
    assert values["TAPROOT_MCP_URL"] == "http://127.0.0.1:8000/mcp"
    assert {"127.0.0.1", "localhost"} <= set(values["ALLOWED_HOSTS"])
    assert values["TAPROOT_ALLOW_LOOPBACK_CLIENTS"] is True  # on because DEBUG is
    assert values["CATALOG_WINDOW_DAYS"] == 45
    assert values["REFLECT_MAX_TOKENS"] == 8000
    assert values["TAPROOT_REFLECT_NUDGE_HOURS"] == 12
    assert values["ENGINE"] == "django.db.backends.sqlite3"
    assert values["DATABASE"] == str(ROOT / "db.sqlite3")


def test_every_variable_of_the_spec_is_read():
    values = loaded(
        {
            "DEBUG": "0",
            "SECRET_KEY": "a-production-secret-that-is-long-enough-0123456789",
            "TAPROOT_PUBLIC_URL": "https://memory.example.org/",
            "ALLOWED_HOSTS": "memory.example.org, internal.example.org",
            "CATALOG_WINDOW_DAYS": "10",
            "REFLECT_MAX_TOKENS": "2000",
            "DATABASE_URL": "sqlite:////var/lib/taproot/store.sqlite3",
        }
    )
    assert values["DEBUG"] is False
    assert values["SECRET_KEY"] == "a-production-secret-that-is-long-enough-0123456789"
    assert values["TAPROOT_PUBLIC_URL"] == "https://memory.example.org"
    assert values["TAPROOT_MCP_URL"] == "https://memory.example.org/mcp"
    assert values["ALLOWED_HOSTS"] == ["memory.example.org", "internal.example.org"]
    assert values["TAPROOT_ALLOW_LOOPBACK_CLIENTS"] is False  # off because DEBUG is
    assert values["CATALOG_WINDOW_DAYS"] == 10
    assert values["REFLECT_MAX_TOKENS"] == 2000
    assert values["DATABASE"] == "/var/lib/taproot/store.sqlite3"


def test_the_reflect_nudge_hours_are_read():
    assert loaded({"TAPROOT_REFLECT_NUDGE_HOURS": "6"})["TAPROOT_REFLECT_NUDGE_HOURS"] == 6


def test_without_a_public_url_it_is_where_the_run_command_listens():
    assert loaded({"PORT": "8101"})["TAPROOT_MCP_URL"] == "http://127.0.0.1:8101/mcp"
    values = loaded({"HOST": "0.0.0.0", "PORT": "8101"})  # every interface: this machine's
    assert values["TAPROOT_PUBLIC_URL"] == "http://127.0.0.1:8101"
    values = loaded({"HOST": "::1", "PORT": "8101"})
    assert values["TAPROOT_PUBLIC_URL"] == "http://[::1]:8101"
    assert "[::1]" in values["ALLOWED_HOSTS"]
    values = loaded({"PORT": "8101", "TAPROOT_PUBLIC_URL": "https://memory.example.org"})
    assert values["TAPROOT_MCP_URL"] == "https://memory.example.org/mcp"


def test_loopback_clients_can_be_turned_on_or_off_explicitly():
    off = loaded({"TAPROOT_ALLOW_LOOPBACK_CLIENTS": "0"})
    assert off["TAPROOT_ALLOW_LOOPBACK_CLIENTS"] is False
    on = loaded({"DEBUG": "0", "SECRET_KEY": "s" * 50, "TAPROOT_ALLOW_LOOPBACK_CLIENTS": "1"})
    assert on["TAPROOT_ALLOW_LOOPBACK_CLIENTS"] is True


def test_postgresql_connections_are_pooled_unless_the_pool_size_is_zero():
    url = {"DATABASE_URL": "postgres://taproot@db.internal/taproot"}
    assert loaded(url)["POOL"]["max_size"] == 10
    assert loaded({**url, "TAPROOT_DB_POOL_SIZE": "4"})["POOL"]["max_size"] == 4
    assert loaded({**url, "TAPROOT_DB_POOL_SIZE": "0"})["POOL"] is None
    assert loaded({"TAPROOT_DB_POOL_SIZE": "4"})["POOL"] is None  # SQLite has no pool


def test_the_pool_checks_each_connection_it_lends_and_waits_a_few_seconds_at_most():
    url = {"DATABASE_URL": "postgres://taproot@db.internal/taproot"}
    pool = loaded(url)["POOL"]
    assert pool["check"] == "psycopg_pool.pool.ConnectionPool.check_connection"
    assert pool["timeout"] == 5
    assert loaded({**url, "TAPROOT_DB_POOL_TIMEOUT": "2"})["POOL"]["timeout"] == 2


def test_the_mcp_guards_against_slow_and_greedy_clients_are_configurable():
    defaults = loaded({})
    assert defaults["TAPROOT_MCP_BODY_TIMEOUT"] == 10
    assert defaults["TAPROOT_MCP_REQUESTS_PER_TOKEN"] == 5
    values = loaded({"TAPROOT_MCP_BODY_TIMEOUT": "3", "TAPROOT_MCP_REQUESTS_PER_TOKEN": "2"})
    assert values["TAPROOT_MCP_BODY_TIMEOUT"] == 3
    assert values["TAPROOT_MCP_REQUESTS_PER_TOKEN"] == 2


@pytest.mark.parametrize("secret", [None, "", "   "])
def test_without_debug_a_missing_secret_key_refuses_to_start(secret):
    env = {"DEBUG": "0"} if secret is None else {"DEBUG": "0", "SECRET_KEY": secret}
    result = settings_with(env)
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr
    assert "SECRET_KEY must be set" in result.stderr


@pytest.mark.parametrize(
    ("env", "says"),
    [
        ({"DEBUG": "maybe"}, "DEBUG must be 1 or 0"),
        ({"PORT": "http"}, "PORT must be a whole number"),
        ({"CATALOG_WINDOW_DAYS": "a month"}, "CATALOG_WINDOW_DAYS must be a whole number"),
        ({"REFLECT_MAX_TOKENS": "-5"}, "REFLECT_MAX_TOKENS must be at least"),
        # Below 2,000 the payload's fixed parts might not fit its budget.
        ({"REFLECT_MAX_TOKENS": "1999"}, "REFLECT_MAX_TOKENS must be at least 2000"),
        ({"TAPROOT_REFLECT_NUDGE_HOURS": "0"}, "TAPROOT_REFLECT_NUDGE_HOURS must be at least 1"),
        ({"TAPROOT_DB_POOL_SIZE": "ten"}, "TAPROOT_DB_POOL_SIZE must be a whole number"),
        ({"TAPROOT_DB_POOL_TIMEOUT": "0"}, "TAPROOT_DB_POOL_TIMEOUT must be at least 1"),
        ({"TAPROOT_MCP_BODY_TIMEOUT": "0"}, "TAPROOT_MCP_BODY_TIMEOUT must be at least 1"),
        (
            {"TAPROOT_MCP_REQUESTS_PER_TOKEN": "0"},
            "TAPROOT_MCP_REQUESTS_PER_TOKEN must be at least",
        ),
    ],
)
def test_malformed_values_refuse_to_start_naming_the_variable(env, says):
    result = settings_with(env)
    assert result.returncode != 0
    assert says in result.stderr


# --- SQLite under concurrent use -------------------------------------------------------


def sqlite_only() -> None:
    if connection.vendor != "sqlite":
        pytest.skip("SQLite connection settings")


@pytest.mark.django_db
def test_sqlite_connections_use_wal_and_wait_for_the_write_lock():
    sqlite_only()
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA journal_mode")
        assert cursor.fetchone()[0] == "wal"
        cursor.execute("PRAGMA busy_timeout")
        assert cursor.fetchone()[0] >= 5_000
        cursor.execute("PRAGMA foreign_keys")
        assert cursor.fetchone()[0] == 1


@pytest.mark.django_db(transaction=True)
def test_sqlite_write_transactions_take_the_write_lock_when_they_begin():
    # IMMEDIATE: a transaction that starts by reading never has to upgrade its lock
    # later, which is what makes SQLite fail with "database is locked" at once.
    sqlite_only()
    other = sqlite3.connect(connection.settings_dict["NAME"], timeout=0, isolation_level=None)
    try:
        with transaction.atomic():
            connection.cursor().execute("SELECT 1")
            with pytest.raises(sqlite3.OperationalError, match="locked"):
                other.execute("BEGIN IMMEDIATE")
        other.execute("BEGIN IMMEDIATE")  # free again once the transaction ends
        other.execute("ROLLBACK")
    finally:
        other.close()
