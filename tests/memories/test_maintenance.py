import pytest
from django.core.management import call_command
from django.db import connection

from memories.maintenance import refresh_planner_statistics
from tests.memories.conftest import forget_sqlite_statistics

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def forget_statistics_afterwards(db):
    """Statistics loaded into a connection outlive the rolled-back transaction: drop
    them, so other tests plan their queries as on a store never analysed."""
    yield
    forget_sqlite_statistics()


def _plan(sql: str, params: list) -> str:
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN QUERY PLAN " + sql, params)
        return " ".join(str(row[-1]) for row in cursor.fetchall())


def test_sqlite_gets_statistics_so_id_lookups_use_the_primary_key(user, make_memory):
    if connection.vendor != "sqlite":
        pytest.skip("SQLite only: PostgreSQL gathers statistics itself")
    made = [make_memory(gist=f"memory {i}") for i in range(30)]
    lookup = "SELECT id FROM memories_memory WHERE owner_id = %s AND id IN (%s, %s)"
    params = [user.pk, made[0].pk.hex, made[1].pk.hex]

    refresh_planner_statistics()

    assert "sqlite_autoindex_memories_memory_1" in _plan(lookup, params)


def test_migrate_refreshes_sqlite_statistics(user, make_memory):
    if connection.vendor != "sqlite":
        pytest.skip("SQLite only")
    make_memory()
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM sqlite_stat1")
    call_command("migrate", verbosity=0)
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM sqlite_stat1 WHERE tbl = 'memories_memory'")
        assert cursor.fetchone()[0] > 0


def test_postgresql_statistics_refresh_runs(user, make_memory):
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL only")
    make_memory()
    refresh_planner_statistics()  # ANALYZE on the three tables; must not fail in a transaction
