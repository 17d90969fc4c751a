"""Where a /mcp request's database work runs: a fixed set of threads, each keeping its
connection between requests.

Django's own requests under ASGI get a thread each (a thread-sensitive context), open a
connection on it and close it when the request ends, so every request pays for a new
thread and, on SQLite, for opening the file and running its PRAGMAs. /mcp requests
instead run their synchronous work (the token lookup, then the tool's service call) as
calls on this module's threads (each a trip of mcp_bridge.trips):

- PostgreSQL with a pool (TAPROOT_DB_POOL_SIZE > 0): a call borrows a pooled connection
  when it first needs one and gives it back when it ends. The pool checks a connection
  before lending it, so one the server dropped is replaced.
- PostgreSQL without a pool: a call opens its connection and closes it when it ends.
- SQLite: each thread keeps its connection from one call to the next (its PRAGMAs run
  once, when it opens). Before each call it checks that the database file is still the
  one it opened (device and inode): a file replaced underneath, as by a restore, is
  reopened instead of read from the old, unlinked one.

Why running Django's ORM off the thread-sensitive executor is safe here: Django keeps a
connection per thread and requires that it not be shared, and that a transaction begin
and end on one thread. Each call is one function that runs start to finish on one of
these threads, so its transactions begin and end inside it; between calls a connection
is either back in the pool (PostgreSQL) or idle in autocommit on its own thread (SQLite),
and no asynchronous code touches the database.

This replaces Django's own connection handling for /mcp. Its equivalent is what Django
does for every other request: the work on a thread-sensitive `sync_to_async`, and
`close_old_connections` on `request_started` and `request_finished`. The tests hold this
module to what that gives a request: tests/mcp/test_connections.py (a SQLite file
replaced by a restore is read from the next request on; PostgreSQL connections the server
dropped do not fail the next call), tests/mcp/test_endpoint.py
(test_each_request_gives_its_connection_back, with and without a pool;
test_sqlite_connections_are_kept_from_one_request_to_the_next;
test_a_tool_call_makes_two_trips_off_the_event_loop_and_nothing_else_does).

A call that waits longer than TAPROOT_DB_POOL_TIMEOUT for a pooled connection fails with
the error `is_pool_timeout` recognises; /mcp answers it with BUSY_MESSAGE (503 with
Retry-After before a tool runs, a tool error inside one), and so do Django's pages
(taproot_site.busy): the server is busy rather than broken, and a client that tries
again shortly gets through.
"""

import contextlib
import os
import sqlite3
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from django.db import DEFAULT_DB_ALIAS, DatabaseError, connection, connections
from django.db.backends.sqlite3.base import DatabaseWrapper as SQLiteDatabase

from mcp_bridge import trips
from memories.locks import is_lock_timeout
from memories.maintenance import follow_statistics

# Threads for SQLite: it writes one transaction at a time and Python computes on one
# thread at a time, so a few keep a worker busy; each keeps a connection and its page
# cache, so more only cost memory (10 took a worker 20 MB above what 4 take, no faster).
SQLITE_THREADS = 4
# Threads for PostgreSQL without a pool, and the fewest with one.
DEFAULT_THREADS = 10


RETRY_AFTER_SECONDS = 5
BUSY_MESSAGE = (
    "Taproot is busy: every database connection is in use. "
    f"Try again in {RETRY_AFTER_SECONDS} seconds."
)


LOCKED_MESSAGE = (
    "Taproot is busy: another change held the database longer than a write waits for it. "
    f"Try again in {RETRY_AFTER_SECONDS} seconds."
)


def is_pool_timeout(error: BaseException) -> bool:
    """True for the database error Django raises when no pooled connection came free.

    Only a pool raises that, and only PostgreSQL's settings import psycopg's pool
    (taproot_site.env): where it was never imported, no error can come from it."""
    pool = sys.modules.get("psycopg_pool")
    return (
        pool is not None
        and isinstance(error, DatabaseError)
        and isinstance(error.__cause__, pool.PoolTimeout)
    )


def busy_message(error: BaseException) -> str | None:
    """What to answer for a database error that means "busy, try again" (no pooled
    connection came free, or a lock was not granted in time): None for any other."""
    if is_pool_timeout(error):
        return BUSY_MESSAGE
    if is_lock_timeout(error):
        return LOCKED_MESSAGE
    return None


_executor: ThreadPoolExecutor | None = None
_executor_lock = threading.Lock()


def thread_count() -> int:
    """With a pool, twice as many threads as it has connections: a call that finds every
    connection lent out then waits at the pool, which gives up after
    TAPROOT_DB_POOL_TIMEOUT (answered 503), rather than queueing for a thread without
    a deadline."""
    if connection.vendor == "sqlite":
        return SQLITE_THREADS
    pool = connection.settings_dict.get("OPTIONS", {}).get("pool")
    if isinstance(pool, dict):
        return max(DEFAULT_THREADS, 2 * int(pool.get("max_size", DEFAULT_THREADS)))
    return DEFAULT_THREADS


def executor() -> ThreadPoolExecutor:
    """This process's threads for /mcp database work (made on first use)."""
    global _executor
    if _executor is None:
        with _executor_lock:
            if _executor is None:
                _executor = ThreadPoolExecutor(thread_count(), thread_name_prefix="taproot-db")
    return _executor


async def run_sync[**P, R](function: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R:
    """`function(*args, **kwargs)` on one of the database threads, with its connection
    ready (see the module's docstring); the caller's context variables are visible to it."""
    return await trips.on_thread(executor(), in_database_thread, function, *args, **kwargs)


def in_database_thread[**P, R](function: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R:
    """Run `function` with this thread's connection ready, and leave the connection as the
    next call on this thread expects it."""
    if _sqlite_file() is not None:
        _reopen_if_replaced()
    if isinstance(raw := connection.connection, sqlite3.Connection):
        follow_statistics(raw)
    try:
        return function(*args, **kwargs)
    finally:
        _end_call()


# Per thread: `opened`, its SQLite connection and the identity (device, inode) of the file
# it opened; `before_call`, the file's identity when the current call began.
_local = threading.local()
# Every thread's SQLite connection and the identity of the file it opened, to close when
# the process stops.
_kept: dict[sqlite3.Connection, tuple[int, int] | None] = {}
_kept_lock = threading.Lock()


def _file_identity() -> tuple[int, int] | None:
    try:
        found = os.stat(connection.settings_dict["NAME"])
    except OSError:  # gone: whatever opens next will say so
        return None
    return found.st_dev, found.st_ino


def _sqlite_file() -> SQLiteDatabase | None:
    """This thread's connection when it is to a SQLite file (not to memory)."""
    database = connections[DEFAULT_DB_ALIAS]
    if isinstance(database, SQLiteDatabase) and not database.is_in_memory_db():
        return database
    return None


def _reopen_if_replaced() -> None:
    current = _file_identity()
    opened = getattr(_local, "opened", None)
    if connection.connection is not None and opened != (connection.connection, current):
        _close_stale()
    # Read before the call opens a connection: should the file be replaced in between,
    # the identity kept is the old one and the next call reopens (never the reverse).
    _local.before_call = current


def _close_stale() -> None:
    """Close a connection to a database file that is no longer at its path.

    Without checkpointing: on closing, SQLite folds the write-ahead log into the database
    file and deletes the log *by its name*, which now belongs to the file that replaced
    this one.
    """
    raw = connection.connection
    if isinstance(raw, sqlite3.Connection):
        with _kept_lock:
            _kept.pop(raw, None)
        _without_checkpoint(raw)
    connection.close()


def _without_checkpoint(raw: sqlite3.Connection) -> None:
    with contextlib.suppress(sqlite3.Error):
        raw.setconfig(sqlite3.SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, True)


def _end_call() -> None:
    if _sqlite_file() is None:
        # PostgreSQL: back to the pool (or closed, without one).
        connection.close()
        return
    raw = connection.connection
    if raw is None:
        return
    # As Django's close_if_unusable_or_obsolete, less the age limit: a connection left in
    # a state the next call cannot rely on is closed.
    autocommit_changed = connection.get_autocommit() != connection.settings_dict["AUTOCOMMIT"]
    broken = connection.errors_occurred and not connection.is_usable()
    if connection.in_atomic_block or autocommit_changed or broken:
        with _kept_lock:
            _kept.pop(raw, None)
        connection.close()
        return
    connection.errors_occurred = False
    opened = getattr(_local, "opened", None)
    if opened is None or opened[0] is not raw:
        _local.opened = (raw, _local.before_call)
        with _kept_lock:
            if opened is not None:
                _kept.pop(opened[0], None)
            _kept[raw] = _local.before_call


def shutdown() -> None:
    """Stop the threads and close the SQLite connections they kept: the last connection
    to close folds the write-ahead log into the database file, so that a stopped server
    leaves one self-contained file, as it did when every request closed its own. One to a
    file since replaced closes without touching the log, which is the new file's now."""
    global _executor
    with _executor_lock:
        if _executor is not None:
            _executor.shutdown(wait=True)
            _executor = None
    current = _file_identity() if _kept else None
    with _kept_lock:
        for raw, identity in _kept.items():
            if identity != current:
                _without_checkpoint(raw)
            raw.close()
        _kept.clear()
