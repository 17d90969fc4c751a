"""Settings come from environment variables with the defaults of SPEC §1 and §11, and
SQLite is set up so that simultaneous requests wait for each other instead of failing.

The settings module is run in this process for each environment a test gives (runpy, under
a patched os.environ): an interpreter per reading would cost a second or more each. One
test starts a fresh interpreter and checks that it reads what this process reads."""

import json
import os
import runpy
import sqlite3
import subprocess
import sys
from datetime import timedelta
from pathlib import PurePath
from typing import Any
from unittest import mock

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.db import connection, transaction

from tests.live_server import ROOT

SETTINGS_FILE = ROOT / "taproot_site" / "settings.py"
SPEC_VARIABLES = (
    "DATABASE_URL",
    "DEBUG",
    "SECRET_KEY",
    "ALLOWED_HOSTS",
    "CATALOG_WINDOW_DAYS",
    "REFLECT_MAX_TOKENS",
)


def environment(env: dict[str, str]) -> dict[str, str]:
    """This process's environment with none of the settings' variables but those in `env`."""
    clean = {
        k: v
        for k, v in os.environ.items()
        if k not in SPEC_VARIABLES and k not in {"HOST", "PORT"} and not k.startswith("TAPROOT_")
    }
    return {**clean, **env}


def settings_under(env: dict[str, str]) -> dict[str, Any]:
    """Every setting taproot_site/settings.py defines when it runs in `environment(env)`."""
    with mock.patch.dict(os.environ, environment(env), clear=True):
        values = runpy.run_path(str(SETTINGS_FILE))
    return {name: value for name, value in values.items() if name.isupper()}


def as_json(values: dict[str, Any]) -> Any:
    """`values` as JSON reads them: paths as text, durations in seconds, functions and
    classes by their names."""

    def named(value: Any) -> str | float:
        if isinstance(value, PurePath):
            return str(value)
        if isinstance(value, timedelta):
            return value.total_seconds()
        return f"{value.__module__}.{value.__qualname__}"

    return json.loads(json.dumps(values, default=named))


def loaded(env: dict[str, str]) -> dict[str, Any]:
    values = as_json(settings_under(env))
    database = values["DATABASES"]["default"]
    return {
        **values,
        "DATABASE": database["NAME"],
        "ENGINE": database["ENGINE"],
        "POOL": database.get("OPTIONS", {}).get("pool"),
    }


PRODUCTION = {
    "DEBUG": "0",
    "SECRET_KEY": "a-production-secret-that-is-long-enough-0123456789",
    "TAPROOT_PUBLIC_URL": "https://memory.example.org/",
    "ALLOWED_HOSTS": "memory.example.org, internal.example.org",
    "CATALOG_WINDOW_DAYS": "10",
    "REFLECT_MAX_TOKENS": "2000",
    "DATABASE_URL": "sqlite:////var/lib/taproot/store.sqlite3",
}

# What Django's own settings loading makes of the module in a fresh interpreter.
READ_SETTINGS = """
import json, sys
from django.conf import settings
from tests.site.test_settings import as_json
print(json.dumps(as_json({name: getattr(settings, name) for name in json.loads(sys.argv[1])})))
"""


def test_a_fresh_interpreter_reads_the_settings_this_process_reads():
    expected = as_json(settings_under(PRODUCTION))
    result = subprocess.run(
        [sys.executable, "-c", READ_SETTINGS, json.dumps(sorted(expected))],
        cwd=ROOT,
        env={**environment(PRODUCTION), "DJANGO_SETTINGS_MODULE": "taproot_site.settings"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == expected
    assert expected["DEBUG"] is False and expected["CATALOG_WINDOW_DAYS"] == 10


LOADED_DRIVERS = """
import sys, django
django.setup()
import taproot_site.asgi, taproot_site.server, memories.services
print(" ".join(sorted(name for name in sys.modules if name.startswith("psycopg"))))
"""


def test_a_server_on_sqlite_never_loads_the_postgresql_driver():
    # psycopg and its pool take a tenth of a second of every process's start.
    result = subprocess.run(
        [sys.executable, "-c", LOADED_DRIVERS],
        cwd=ROOT,
        env={**environment({}), "DJANGO_SETTINGS_MODULE": "taproot_site.settings"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == []


def test_nothing_set_gives_safe_local_defaults():
    values = loaded({})
    assert values["DEBUG"] is True
    assert values["SECRET_KEY"]
    assert values["TAPROOT_PUBLIC_URL"] == "http://127.0.0.1:8000"
    assert values["TAPROOT_MCP_URL"] == "http://127.0.0.1:8000/mcp"
    assert {"127.0.0.1", "localhost"} <= set(values["ALLOWED_HOSTS"])
    assert values["TAPROOT_ALLOW_LOOPBACK_CLIENTS"] is True  # on because DEBUG is
    assert values["CATALOG_WINDOW_DAYS"] == 0  # the catalog window is off
    assert values["REFLECT_MAX_TOKENS"] == 8000
    assert values["TAPROOT_REFLECT_NUDGE_HOURS"] == 12
    assert values["TAPROOT_RETRY_WINDOW_MINUTES"] == 10
    assert values["ENGINE"] == "django.db.backends.sqlite3"
    assert values["DATABASE"] == str(ROOT / "db.sqlite3")


def test_every_variable_of_the_spec_is_read():
    values = loaded(PRODUCTION)
    assert values["DEBUG"] is False
    assert values["SECRET_KEY"] == "a-production-secret-that-is-long-enough-0123456789"
    assert values["TAPROOT_PUBLIC_URL"] == "https://memory.example.org"
    assert values["TAPROOT_MCP_URL"] == "https://memory.example.org/mcp"
    assert values["ALLOWED_HOSTS"] == ["memory.example.org", "internal.example.org"]
    assert values["TAPROOT_ALLOW_LOOPBACK_CLIENTS"] is False  # off because DEBUG is
    assert values["CATALOG_WINDOW_DAYS"] == 10
    assert values["REFLECT_MAX_TOKENS"] == 2000
    assert values["DATABASE"] == "/var/lib/taproot/store.sqlite3"


def test_the_retry_window_is_read():
    assert loaded({"TAPROOT_RETRY_WINDOW_MINUTES": "3"})["TAPROOT_RETRY_WINDOW_MINUTES"] == 3
    assert loaded({"TAPROOT_RETRY_WINDOW_MINUTES": "0"})["TAPROOT_RETRY_WINDOW_MINUTES"] == 0


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


def test_logins_lock_after_ten_failures_for_fifteen_minutes_unless_configured():
    defaults = loaded({})
    assert defaults["AXES_FAILURE_LIMIT"] == 10
    assert defaults["AXES_COOLOFF_TIME"] == 15 * 60
    assert defaults["AXES_LOCKOUT_PARAMETERS"] == [["username", "ip_address"]]
    values = loaded({"TAPROOT_LOGIN_FAILURE_LIMIT": "5", "TAPROOT_LOGIN_LOCKOUT_MINUTES": "60"})
    assert values["AXES_FAILURE_LIMIT"] == 5
    assert values["AXES_COOLOFF_TIME"] == 60 * 60


def test_the_mcp_guards_against_slow_and_greedy_clients_are_configurable():
    defaults = loaded({})
    assert defaults["TAPROOT_MCP_BODY_TIMEOUT"] == 10
    assert defaults["TAPROOT_MCP_BUFFER_MB"] == 64
    assert defaults["TAPROOT_MCP_REQUESTS_PER_USER"] == 8
    assert defaults["TAPROOT_MCP_QUEUE_TIMEOUT"] == 10
    values = loaded(
        {
            "TAPROOT_MCP_BODY_TIMEOUT": "3",
            "TAPROOT_MCP_BUFFER_MB": "16",
            "TAPROOT_MCP_REQUESTS_PER_USER": "2",
            "TAPROOT_MCP_QUEUE_TIMEOUT": "0",
        }
    )
    assert values["TAPROOT_MCP_BODY_TIMEOUT"] == 3
    assert values["TAPROOT_MCP_BUFFER_MB"] == 16
    assert values["TAPROOT_MCP_REQUESTS_PER_USER"] == 2
    assert values["TAPROOT_MCP_QUEUE_TIMEOUT"] == 0


def test_the_vector_cache_budget_is_configurable():
    assert loaded({})["TAPROOT_VECTOR_CACHE_MB"] == 256
    assert loaded({"TAPROOT_VECTOR_CACHE_MB": "64"})["TAPROOT_VECTOR_CACHE_MB"] == 64


def test_the_postings_cache_budget_is_configurable():
    assert loaded({})["TAPROOT_POSTINGS_CACHE_MB"] == 64
    assert loaded({"TAPROOT_POSTINGS_CACHE_MB": "0"})["TAPROOT_POSTINGS_CACHE_MB"] == 0


def test_reading_owners_ahead_can_be_turned_off():
    assert loaded({})["TAPROOT_WARM_OWNERS"] is True
    assert loaded({"TAPROOT_WARM_OWNERS": "0"})["TAPROOT_WARM_OWNERS"] is False


@pytest.mark.parametrize("secret", [None, "", "   "])
def test_without_debug_a_missing_secret_key_refuses_to_start(secret):
    env = {"DEBUG": "0"} if secret is None else {"DEBUG": "0", "SECRET_KEY": secret}
    with pytest.raises(ImproperlyConfigured, match="SECRET_KEY must be set"):
        settings_under(env)


@pytest.mark.parametrize(
    "secret",
    ["change-me-to-a-long-random-string", "change-me-" + "x" * 60, "short-but-not-a-placeholder"],
)
def test_without_debug_a_placeholder_or_short_secret_key_refuses_to_start(secret):
    with pytest.raises(ImproperlyConfigured) as refused:
        settings_under({"DEBUG": "0", "SECRET_KEY": secret})
    message = str(refused.value)
    assert "placeholder or shorter than 50 characters" in message
    assert "python3 -c 'import secrets; print(secrets.token_urlsafe(50))'" in message


def test_with_debug_on_a_short_secret_key_is_allowed():
    assert settings_under({"DEBUG": "1", "SECRET_KEY": "dev"})["SECRET_KEY"] == "dev"


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
        ({"TAPROOT_LOGIN_FAILURE_LIMIT": "0"}, "TAPROOT_LOGIN_FAILURE_LIMIT must be at least 1"),
        (
            {"TAPROOT_LOGIN_LOCKOUT_MINUTES": "soon"},
            "TAPROOT_LOGIN_LOCKOUT_MINUTES must be a whole",
        ),
        (
            {"TAPROOT_MCP_REQUESTS_PER_USER": "0"},
            "TAPROOT_MCP_REQUESTS_PER_USER must be at least",
        ),
        # A body of the largest size the endpoint takes (4 MiB) must fit.
        ({"TAPROOT_MCP_BUFFER_MB": "3"}, "TAPROOT_MCP_BUFFER_MB must be at least 4"),
        ({"TAPROOT_MCP_QUEUE_TIMEOUT": "-1"}, "TAPROOT_MCP_QUEUE_TIMEOUT must be at least 0"),
        ({"TAPROOT_VECTOR_CACHE_MB": "8"}, "TAPROOT_VECTOR_CACHE_MB must be at least 16"),
        ({"TAPROOT_POSTINGS_CACHE_MB": "-1"}, "TAPROOT_POSTINGS_CACHE_MB must be at least 0"),
        # The per-token limit became a per-user one: an old setting is not silently ignored.
        (
            {"TAPROOT_MCP_REQUESTS_PER_TOKEN": "5"},
            "Rename it TAPROOT_MCP_REQUESTS_PER_USER",
        ),
        (
            {"TAPROOT_EMBEDDER": "bert"},
            "TAPROOT_EMBEDDER must be one of wordllama, minilm, none, or onnx:",
        ),
        ({"TAPROOT_EMBEDDER": "onnx:  "}, "TAPROOT_EMBEDDER must be one of"),
    ],
)
def test_malformed_values_refuse_to_start_naming_the_variable(env, says):
    with pytest.raises(ImproperlyConfigured) as refused:
        settings_under(env)
    assert says in str(refused.value)


@pytest.mark.parametrize(
    ("given", "read"),
    [
        ("MiniLM", "minilm"),
        (" none ", "none"),
        ("onnx:/srv/Models/bge-small", "onnx:/srv/Models/bge-small"),
        ("ONNX: relative/E5", "onnx:relative/E5"),
    ],
)
def test_the_embedder_is_a_name_in_any_case_or_an_onnx_folder_as_given(given, read):
    assert settings_under({"TAPROOT_EMBEDDER": given})["TAPROOT_EMBEDDER"] == read


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


def test_an_https_public_url_gets_hsts_and_its_wider_forms_only_when_asked():
    values = loaded(PRODUCTION)
    assert values["SECURE_HSTS_SECONDS"] == 60 * 60 * 24 * 30
    assert values["SECURE_HSTS_INCLUDE_SUBDOMAINS"] is False
    assert values["SECURE_HSTS_PRELOAD"] is False
    wider = loaded(
        {**PRODUCTION, "SECURE_HSTS_INCLUDE_SUBDOMAINS": "1", "SECURE_HSTS_PRELOAD": "1"}
    )
    assert wider["SECURE_HSTS_INCLUDE_SUBDOMAINS"] is True
    assert wider["SECURE_HSTS_PRELOAD"] is True
    assert "SECURE_HSTS_SECONDS" not in loaded({})  # not over plain HTTP on this machine


def test_django_never_reads_the_scheme_from_a_request_header():
    # uvicorn sets it from trusted proxies only (tests/site/test_https_behind_a_proxy.py).
    assert loaded(PRODUCTION)["SECURE_PROXY_SSL_HEADER"] is None


@pytest.mark.parametrize(("days", "seconds"), [(None, 30 * 86400), ("7", 7 * 86400)])
def test_access_tokens_last_30_days_unless_told_otherwise(days, seconds):
    env = {} if days is None else {"TAPROOT_ACCESS_TOKEN_DAYS": days}
    read = settings_under(env)
    assert read["OAUTH2_PROVIDER"]["ACCESS_TOKEN_EXPIRE_SECONDS"] == seconds


def test_an_access_token_lifetime_under_a_day_is_refused():
    with pytest.raises(ImproperlyConfigured, match="TAPROOT_ACCESS_TOKEN_DAYS"):
        settings_under({"TAPROOT_ACCESS_TOKEN_DAYS": "0"})
