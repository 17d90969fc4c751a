"""SQLite: copies through SQLite's online backup API, never a file copy.

A file copy of a live WAL database can miss what sits in the -wal file or catch a page
half written. The backup API reads pages through SQLite's own locking. Left to itself it
starts over whenever another connection writes between two of its steps, which on a busy
server can be forever; holding one read transaction on the source for the whole copy
gives it a fixed snapshot instead (in WAL mode a reader never blocks writers), so it
copies exactly the database as of the moment that transaction began, in steps a progress
bar can follow.

A restore runs the same API the other way, into the live database file: SQLite holds a
write transaction on the target for the whole copy, so other connections see the old
database or the new one, never a mix, and the -wal file stays consistent with it.
"""

import sqlite3
from collections.abc import Callable
from pathlib import Path

from memories.portability.backups import state
from memories.portability.backups.errors import BackupError
from memories.portability.backups.progress import Progress

# Pages copied per step of the backup API (4 MB at SQLite's default page size).
PAGES_PER_STEP = 1024
BUSY_TIMEOUT = 30


def quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def server_version() -> str:
    return sqlite3.sqlite_version


def copy_live(source: Path, target: Path, *, progress: Progress) -> None:
    """Copy the database at `source`, while others read and write it, into a new file
    at `target`: one consistent snapshot, as of the start."""
    if not source.is_file():
        raise BackupError(f"There is no database at {source}: nothing to back up.")
    try:
        live = sqlite3.connect(source, timeout=BUSY_TIMEOUT, isolation_level=None)
    except sqlite3.Error as error:
        raise BackupError(f"Cannot open the database at {source}: {error}.") from None
    try:
        # A deferred BEGIN takes its snapshot at the first read.
        live.execute("BEGIN")
        live.execute("SELECT count(*) FROM sqlite_master").fetchone()
        copy = sqlite3.connect(target, isolation_level=None)
        try:
            with progress.bar("Copying", unit="page") as bar:
                live.backup(copy, pages=PAGES_PER_STEP, progress=_follow(bar.reset, bar.update))
            # A file that stands alone: no -wal beside it is needed to read it.
            copy.execute("PRAGMA journal_mode=DELETE")
        finally:
            copy.close()
        live.execute("COMMIT")
    except sqlite3.Error as error:
        raise BackupError(f"Copying the database at {source} failed: {error}.") from None
    finally:
        live.close()


def read_copy(
    path: Path, *, what: str, progress: Progress
) -> tuple[dict[str, int], dict[str, list[str]]]:
    """Check a copy (SQLite's integrity_check) and read its tables' rows and applied
    migrations. BackupError, naming the copy as `what`, when it is not a sound SQLite
    database."""
    damaged = f"{what} is damaged: it fails SQLite's integrity check"
    try:
        copy = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error as error:
        raise BackupError(f"{damaged} ({error}).") from None
    try:
        with progress.step("Checking (integrity_check)"):
            problems = [row[0] for row in copy.execute("PRAGMA integrity_check").fetchall()]
        if problems != ["ok"]:
            raise BackupError(f"{damaged} ({'; '.join(problems[:3])}).")
        cursor = copy.cursor()
        tables = _tables(cursor)
        return state.table_rows(cursor, tables, quote), state.applied_migrations(cursor, tables)
    except sqlite3.DatabaseError as error:
        raise BackupError(f"{damaged} ({error}).") from None
    finally:
        copy.close()


def triggers_and_views(path: Path) -> list[str]:
    """The triggers and views in a (checked) copy, as "trigger NAME on TABLE" and
    "view NAME"; a trigger whose text is not what the migrations wrote is named as
    "trigger NAME on TABLE, altered", so no list of allowed names lets it through."""
    from memories.models.counts_sql import SQLITE_CREATE

    made = set(SQLITE_CREATE)
    copy = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    try:
        found = copy.execute(
            "SELECT type, name, tbl_name, sql FROM sqlite_master WHERE type IN ('trigger', 'view')"
        ).fetchall()
    finally:
        copy.close()
    return [
        f"view {name}"
        if kind == "view"
        else f"trigger {name} on {table}" + ("" if sql in made else ", altered")
        for kind, name, table, sql in found
    ]


def held_rows(path: Path) -> dict[str, int]:
    """Every table's rows in the SQLite database at `path`; none when there is none."""
    if not path.exists() or path.stat().st_size == 0:
        return {}
    try:
        database = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error as error:
        raise BackupError(f"Cannot open the database at {path}: {error}.") from None
    try:
        cursor = database.cursor()
        return state.table_rows(cursor, _tables(cursor), quote)
    except sqlite3.DatabaseError as error:
        raise BackupError(
            f"The file at {path} is not a SQLite database ({error}): move it away, or point "
            "DATABASE_URL at another path."
        ) from None
    finally:
        database.close()


def restore_into(source: Path, target: Path, *, progress: Progress) -> None:
    """Write the database file `source` into the database at `target` (made if it does
    not exist), replacing all it held, as one transaction."""
    if not target.parent.is_dir():
        raise BackupError(
            f"The folder {target.parent} of the database DATABASE_URL names does not exist."
        )
    try:
        backup = sqlite3.connect(f"{source.resolve().as_uri()}?mode=ro", uri=True)
        live = sqlite3.connect(target, timeout=BUSY_TIMEOUT, isolation_level=None)
    except sqlite3.Error as error:
        raise BackupError(f"Cannot open the database at {target}: {error}.") from None
    try:
        with progress.bar("Restoring", unit="page") as bar:
            backup.backup(live, pages=PAGES_PER_STEP, progress=_follow(bar.reset, bar.update))
        live.execute("PRAGMA journal_mode=WAL")
    except sqlite3.Error as error:
        raise BackupError(
            f"Writing the backup into {target} failed, and it was left as it was: {error}."
        ) from None
    finally:
        live.close()
        backup.close()


def _tables(cursor: sqlite3.Cursor) -> list[str]:
    cursor.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
    )
    return [row[0] for row in cursor.fetchall()]


def _follow(
    reset: Callable[[int], object], update: Callable[[int], object]
) -> Callable[[int, int, int], None]:
    """The backup API's progress callback, told to a bar."""
    done = [0, -1]

    def step(status: int, remaining: int, total: int) -> None:
        if total != done[1]:
            reset(total)
            done[:] = [0, total]
        update(total - remaining - done[0])
        done[0] = total - remaining

    return step
