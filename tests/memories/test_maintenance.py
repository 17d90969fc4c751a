import sqlite3

import pytest
from django.core.management import call_command
from django.db import connection

from mcp_bridge.database import in_database_thread
from memories import maintenance
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


def _analysed_rows(table: str) -> int | None:
    """The row count SQLite's statistics hold for a table (the first number of its
    indexes' stat), or None when it was never analysed."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT stat FROM sqlite_stat1 WHERE tbl = %s AND idx IS NOT NULL", [table])
        row = cursor.fetchone()
    return int(row[0].split()[0]) if row else None


@pytest.mark.django_db(transaction=True)
def test_a_store_grown_through_the_service_gets_fresh_statistics_without_a_restart(
    user, lexical_only, monkeypatch
):
    """The path of every new user: a server started on an empty store, grown through
    taproot_remember. Passing a doubling of the owner's store refreshes SQLite's
    statistics in the background, so the planner sees the store as it now is."""
    if connection.vendor != "sqlite":
        pytest.skip("SQLite only: PostgreSQL's autovacuum analyzes a growing table itself")
    from mcp_bridge.handlers import remember

    monkeypatch.setattr(maintenance, "ANALYSIS_INTERVAL", 0.0)
    refresh_planner_statistics()  # as at the start, on the empty store
    assert _analysed_rows("memories_memory") in (None, 0)

    def remember_on_a_kept_connection(n: int) -> None:  # as /mcp runs a tool call
        in_database_thread(
            remember,
            owner=user,
            category="episodic",
            gist=f"Fact {n}",
            content=f"Fact number {n}.",
        )

    remember_on_a_kept_connection(0)
    for n in range(1, maintenance.FIRST_GROWTH_ANALYSIS * 2):
        remember_on_a_kept_connection(n)
    assert maintenance.wait_for_background_analysis(timeout=30)

    assert _analysed_rows("memories_memory") >= maintenance.FIRST_GROWTH_ANALYSIS
    assert _analysed_rows("memories_recallentry") >= maintenance.FIRST_GROWTH_ANALYSIS


def test_a_kept_sqlite_connection_plans_with_statistics_analysed_by_another(tmp_path):
    """SQLite loads statistics when a connection opens, not after: /mcp's kept
    connections follow an analysis made on another connection by its mark. (A file of
    its own: the test database is in memory with a shared cache, which shares them.)"""
    path = tmp_path / "store.sqlite3"
    writer = sqlite3.connect(path, isolation_level=None)
    kept = sqlite3.connect(path, isolation_level=None)
    writer.execute("CREATE TABLE memory (id TEXT PRIMARY KEY, owner INTEGER, touched INTEGER)")
    writer.execute("CREATE INDEX memory_owner ON memory (owner, touched)")
    writer.execute("ANALYZE")
    lookup = "EXPLAIN QUERY PLAN SELECT * FROM memory WHERE owner = 1 AND id IN ('1', '2', '3')"

    def plan(connection: sqlite3.Connection) -> str:
        return " ".join(str(row[-1]) for row in connection.execute(lookup))

    maintenance.follow_statistics(kept)
    assert "memory_owner" in plan(kept)
    # One transaction: 5000 of their own would each wait for the disk (seconds apiece
    # of the suite on a busy machine), and the plan depends only on what ANALYZE finds.
    writer.execute("BEGIN")
    writer.executemany("INSERT INTO memory VALUES (?, 1, ?)", [(str(i), i) for i in range(5000)])
    writer.execute("COMMIT")
    writer.execute("ANALYZE")
    assert "memory_owner" in plan(kept)  # what it planned with before
    maintenance.mark_statistics_refreshed(writer)
    maintenance.follow_statistics(kept)
    assert "sqlite_autoindex_memory_1" in plan(kept)


def test_statistics_are_refreshed_at_each_doubling_only():
    first = maintenance.FIRST_GROWTH_ANALYSIS
    assert maintenance.crosses_growth_threshold(first - 1, first)
    assert not maintenance.crosses_growth_threshold(first, first + 1)
    assert maintenance.crosses_growth_threshold(2 * first - 1, 2 * first)
    assert not maintenance.crosses_growth_threshold(2 * first, 4 * first - 1)
    assert maintenance.crosses_growth_threshold(0, 10 * first)  # an import, at once
    assert not maintenance.crosses_growth_threshold(3 * first, first)  # shrinking
    assert not maintenance.crosses_growth_threshold(0, first - 1)
