"""Keeping the database's query planner informed.

SQLite keeps no table statistics until ANALYZE runs; without them it guesses that
`owner_id = ?` is as selective as a primary key and walks a user's whole store through
the owner index where a handful of primary-key probes would do (see docs/benchmarks.md).
PostgreSQL gathers statistics itself (autovacuum), but only some time after a bulk load.
"""

from django.db import DEFAULT_DB_ALIAS, connections

# Enough sampled rows per index for the shape that matters (few owners, unique ids),
# while ANALYZE stays quick on a store of any size.
SQLITE_ANALYSIS_LIMIT = 1000
TABLES = (
    "memories_memory",
    "memories_memorytoken",
    "memories_memorytag",
    "memories_recallentry",
    "memories_recallindex",
    "memories_memoryvector",
)


def refresh_planner_statistics(using: str = DEFAULT_DB_ALIAS, *, vacuum: bool = False) -> None:
    """ANALYZE the store's tables. With `vacuum`, after a bulk load, PostgreSQL also
    VACUUMs them (outside a transaction only): recall's counts and scoring read the
    covering indexes alone only once the visibility map knows the new rows."""
    connection = connections[using]
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute(f"PRAGMA analysis_limit={SQLITE_ANALYSIS_LIMIT}")
            cursor.execute("ANALYZE")
        elif connection.vendor == "postgresql":
            command = (
                "VACUUM (ANALYZE) " if vacuum and not connection.in_atomic_block else "ANALYZE "
            )
            cursor.execute(command + ", ".join(TABLES))


def analyze_sqlite_after_migrate(using: str = DEFAULT_DB_ALIAS, **kwargs: object) -> None:
    """post_migrate: the run command migrates at every start, so SQLite's statistics
    follow the store as it grows."""
    if connections[using].vendor == "sqlite":
        refresh_planner_statistics(using)
