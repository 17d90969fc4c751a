"""DATABASE_URL and the PostgreSQL connection pool, as settings read them."""

from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from taproot_site.env import database_from_url

BASE = Path("/srv/taproot")


def test_no_url_is_sqlite_in_the_project():
    database = database_from_url("", base_dir=BASE)
    assert database["ENGINE"] == "django.db.backends.sqlite3"
    assert database["NAME"] == BASE / "db.sqlite3"
    assert database["OPTIONS"]["transaction_mode"] == "IMMEDIATE"


def test_sqlite_paths_relative_and_absolute():
    assert database_from_url("sqlite:///data/t.db", base_dir=BASE)["NAME"] == BASE / "data/t.db"
    assert database_from_url("sqlite:////var/t.db", base_dir=BASE)["NAME"] == Path("/var/t.db")


def test_postgres_url_with_a_pool():
    database = database_from_url(
        "postgres://alice:s%40cret@db.internal:6432/taproot", base_dir=BASE, pool_size=8
    )
    assert database["ENGINE"] == "django.db.backends.postgresql"
    assert (database["NAME"], database["USER"], database["PASSWORD"]) == (
        "taproot",
        "alice",
        "s@cret",
    )
    assert (database["HOST"], database["PORT"]) == ("db.internal", "6432")
    assert database["CONN_MAX_AGE"] == 0
    assert database["OPTIONS"]["pool"]["max_size"] == 8


def test_pool_size_zero_opens_a_connection_per_request():
    database = database_from_url("postgres://db.internal/taproot", base_dir=BASE, pool_size=0)
    assert "pool" not in database["OPTIONS"]


def test_sqlite_ignores_the_pool_size():
    database = database_from_url("sqlite:///t.db", base_dir=BASE, pool_size=8)
    assert "pool" not in database["OPTIONS"]


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("mysql://db/taproot", "not supported"),
        ("postgres://db.internal/", "must name a database"),
        ("sqlite://", "sqlite:///relative/path.db"),
    ],
)
def test_bad_urls_say_what_to_write(url, says):
    with pytest.raises(ImproperlyConfigured, match=says):
        database_from_url(url, base_dir=BASE)
