"""Keeping the database's query planner informed.

SQLite keeps no table statistics until ANALYZE runs; without them it guesses that
`owner_id = ?` is as selective as a primary key and walks a user's whole store through
the owner index where a handful of primary-key probes would do (see docs/benchmarks.md).
PostgreSQL gathers statistics itself (autovacuum), but only some time after a bulk load.
"""

import logging
import sqlite3
import threading
import time
from typing import Protocol

from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections, transaction

log = logging.getLogger(__name__)

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


# An owner's live memories passing one of these sizes (doubling from the first) has the
# statistics refreshed: the planner then sees the store a server grew since it started.
FIRST_GROWTH_ANALYSIS = 64
# Analyses a process runs at most once per this many seconds; what is asked meanwhile
# is run together once the interval is over (many owners growing at once).
ANALYSIS_INTERVAL = 30.0


def crosses_growth_threshold(before: int, after: int) -> bool:
    """Whether a store going from `before` to `after` live memories passes a size at
    which its statistics are refreshed (64, 128, 256, …: each doubling)."""
    if after < FIRST_GROWTH_ANALYSIS or after <= before:
        return False
    return before < FIRST_GROWTH_ANALYSIS or after.bit_length() > before.bit_length()


def analyze_after_growth(before: int, after: int) -> None:
    """Called by a write, with the owner's live count before and after it, inside the
    write's transaction: once that commits, refresh SQLite's statistics in the background
    when the store passed a doubling. Decided from the count the write keeps anyway; the
    request never waits for ANALYZE. PostgreSQL's autovacuum analyzes a table on its own
    once a tenth of it changed (autovacuum_analyze_scale_factor)."""
    if connections[DEFAULT_DB_ALIAS].vendor != "sqlite":
        return
    if crosses_growth_threshold(before, after):
        transaction.on_commit(_analyzer.ask)


class _BackgroundAnalyzer:
    """One thread per process that runs ANALYZE when asked, at most once per
    ANALYSIS_INTERVAL, on a connection of its own (closed after each run)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._wanted = threading.Event()
        self._thread: threading.Thread | None = None
        self._last = -ANALYSIS_INTERVAL
        self.runs = 0
        self.idle = threading.Event()
        self.idle.set()

    def ask(self) -> None:
        with self._lock:
            self.idle.clear()
            self._wanted.set()
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._run, name="taproot-analyze", daemon=True
                )
                self._thread.start()

    def _run(self) -> None:
        while True:
            self._wanted.wait()
            time.sleep(max(0.0, self._last + ANALYSIS_INTERVAL - time.monotonic()))
            self._wanted.clear()
            try:
                refresh_planner_statistics()
                _mark_refreshed_statistics()
                self.runs += 1
            except DatabaseError:
                # The write lock stayed taken past the busy timeout: the next doubling
                # (or the next start) analyzes instead.
                log.warning("Refreshing the planner statistics failed", exc_info=True)
            finally:
                connections.close_all()
                self._last = time.monotonic()
            with self._lock:
                if not self._wanted.is_set():
                    self.idle.set()


_analyzer = _BackgroundAnalyzer()

# SQLite loads a database's statistics into a connection when it opens it (or on
# `ANALYZE sqlite_master`), never after: the connections /mcp keeps from call to call
# would plan with the store's size at their opening forever. So an analysis in the
# background makes and drops this table, which moves the schema cookie, and a kept
# connection that finds the cookie moved before a call reloads them.
_STATISTICS_MARK = "taproot_statistics_refreshed"
_followed = threading.local()


class _Executes(Protocol):
    def execute(self, sql: str, /) -> object: ...


def _mark_refreshed_statistics() -> None:
    connection = connections[DEFAULT_DB_ALIAS]
    if connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            mark_statistics_refreshed(cursor)


def mark_statistics_refreshed(cursor: _Executes) -> None:
    """Move SQLite's schema cookie, so kept connections reload the statistics."""
    cursor.execute(f"CREATE TABLE IF NOT EXISTS {_STATISTICS_MARK} (x INTEGER)")
    cursor.execute(f"DROP TABLE {_STATISTICS_MARK}")


def follow_statistics(raw: sqlite3.Connection) -> None:
    """Before a call on a SQLite connection kept from earlier calls: load the statistics
    an analysis wrote since this thread last looked (reading the schema cookie costs a
    few microseconds; the reload, once per analysis, about a millisecond)."""
    (version,) = raw.execute("PRAGMA schema_version").fetchone()
    seen = getattr(_followed, "seen", None)
    if seen is not None and seen[0] is raw and seen[1] != version:
        raw.execute("ANALYZE sqlite_master")
    _followed.seen = (raw, version)


def wait_for_background_analysis(timeout: float) -> bool:
    """Wait until no analysis asked for is left to run (tests and the bench)."""
    return _analyzer.idle.wait(timeout)
