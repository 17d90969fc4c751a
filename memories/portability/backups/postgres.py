"""PostgreSQL: pg_dump in its custom format, written back with pg_restore and psql.

The dump reads one snapshot: a REPEATABLE READ transaction exports it
(`pg_export_snapshot()`), counts every table's rows and reads the applied migrations in
it, and pg_dump copies exactly that snapshot (`--snapshot`), so the manifest and the
dump agree however many writes go on meanwhile.

The restore is one transaction in psql: drop the tables the database holds, run the
script pg_restore makes of the dump, check every table's rows against the manifest, and
commit only when all of that succeeded. Anything that fails (a damaged dump, a missing
role, a count that differs) leaves the database as it was.
"""

import contextlib
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from django.db import transaction
from django.db.backends.postgresql.client import DatabaseClient
from psycopg import sql

from memories.models.counts_sql import FUNCTIONS
from memories.portability.backups import state
from memories.portability.backups.errors import BackupError
from memories.portability.backups.manifest import Manifest
from memories.portability.backups.progress import Progress

# "3342; 0 20355 TABLE DATA public memories_memory postgres" in `pg_restore --list`.
TABLE_DATA = re.compile(r"^\d+; \d+ \d+ TABLE DATA (?P<schema>\S+) (?P<table>\S+) ")
# 'ID; 2620 16523 TRIGGER public memories_memory sneaky postgres', 'VIEW public name owner'.
TRIGGER_OR_VIEW = re.compile(
    r"^\d+; \d+ \d+ (?P<kind>TRIGGER|VIEW) (?P<schema>\S+) (?P<tag>.+) (?P<owner>\S+)$"
)
# pg_dump --verbose: 'pg_dump: dumping contents of table "public.memories_memory"'.
DUMPING = "dumping contents of table"
# pg_restore's script marks each table's rows with this comment.
DATA_FOR = b"-- Data for Name: "


def server_version(connection: Any) -> str:
    major, rest = divmod(int(connection.pg_version), 10000)
    return f"{major}.{rest}"


def tool(name: str, connection: Any) -> str:
    """The path of a PostgreSQL client program, or BackupError saying how to get it."""
    found = shutil.which(name)
    if found is None:
        major = int(connection.pg_version) // 10000
        raise BackupError(
            f"{name} was not found on PATH. Taproot backs up and restores PostgreSQL with "
            "pg_dump, pg_restore and psql, from the PostgreSQL client tools: install those "
            f"of your server's version, {major} (on Debian or Ubuntu: "
            f"`apt install postgresql-client-{major}`), and run this again."
        )
    return found


def dump(
    connection: Any, target: Path, *, progress: Progress
) -> tuple[dict[str, int], dict[str, list[str]]]:
    """Dump the database into `target` while others write it: one snapshot, as of the
    start. Returns what the snapshot held: every table's rows and the applied migrations."""
    pg_dump = tool("pg_dump", connection)
    with transaction.atomic(using=connection.alias), connection.cursor() as cursor:
        cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        cursor.execute("SELECT pg_export_snapshot()")
        snapshot = cursor.fetchone()[0]
        tables = _tables(connection, cursor)
        rows = state.table_rows(cursor, tables, _quoter(cursor))
        migrations = state.applied_migrations(cursor, tables)
        # The snapshot lives as long as this transaction: pg_dump must finish inside it.
        _run_dump(
            [
                pg_dump,
                "--format=custom",
                f"--file={target}",
                f"--snapshot={snapshot}",
                "--no-password",
                "--verbose",
            ],
            connection,
            total=len(tables),
            progress=progress,
        )
    return rows, migrations


def read_dump(path: Path, tables: set[str], *, what: str, progress: Progress) -> int:
    """Check a dump with `pg_restore --list`: it must read, and hold the rows of each of
    these tables. Returns how many tables' rows it holds. BackupError, naming the dump as
    `what`, when it does not."""
    pg_restore = shutil.which("pg_restore")
    if pg_restore is None:
        raise BackupError(
            "pg_restore was not found on PATH: install the PostgreSQL client tools of your "
            "server's version and run this again."
        )
    with progress.step("Checking (pg_restore --list)"):
        listed = subprocess.run(
            [pg_restore, "--list", str(path)], capture_output=True, text=True, check=False
        )
    if listed.returncode != 0:
        raise BackupError(
            f"{what} is damaged: pg_restore cannot read it ({_last_error(listed.stderr)})"
        )
    held = {m["table"] for line in listed.stdout.splitlines() if (m := TABLE_DATA.match(line))}
    missing = sorted(tables - held)
    if missing:
        raise BackupError(
            f"{what} is damaged: it lacks the rows of tables " + ", ".join(missing[:5]) + "."
        )
    return len(held)


def triggers_and_views(path: Path) -> list[str]:
    """The triggers and views in a (checked) dump, as "trigger NAME on TABLE" and
    "view NAME", from its table of contents."""
    pg_restore = shutil.which("pg_restore") or "pg_restore"
    listed = subprocess.run(
        [pg_restore, "--list", str(path)], capture_output=True, text=True, check=False
    )
    found = []
    for line in listed.stdout.splitlines():
        if match := TRIGGER_OR_VIEW.match(line):
            if match["kind"] == "TRIGGER":
                table, _, name = match["tag"].partition(" ")
                found.append(f"trigger {name} on {table}")
            else:
                found.append(f"view {match['tag']}")
    return found


def held_rows(connection: Any) -> dict[str, int]:
    with connection.cursor() as cursor:
        return state.table_rows(cursor, _tables(connection, cursor), _quoter(cursor))


def restore(
    connection: Any, dumped: Path, manifest: Manifest, *, tables: int, progress: Progress
) -> None:
    """Replace everything in the database with the dump, as one transaction."""
    pg_restore = tool("pg_restore", connection)
    psql = tool("psql", connection)
    with connection.cursor() as cursor:
        quote = _quoter(cursor)
        present = _tables(connection, cursor)
    start = "BEGIN;\n"
    if present:
        start += f"DROP TABLE IF EXISTS {', '.join(map(quote, present))} CASCADE;\n"
    # And the trigger functions of the migrations (the dump makes them again).
    start += "".join(f"DROP FUNCTION IF EXISTS {name} CASCADE;\n" for name in FUNCTIONS)
    # The script empties search_path; the check names tables as Django's connection does.
    check = "RESET search_path;\n" + "".join(
        f"DO $$ BEGIN IF (SELECT count(*) FROM {quote(table)}) <> {rows} THEN "
        f"RAISE EXCEPTION 'the table {_literal(table)} does not hold the {rows} rows the "
        "backup lists'; END IF; END $$;\n"
        for table, rows in sorted(manifest.tables.items())
    )
    args, env = DatabaseClient.settings_to_cmd_args_env(
        connection.settings_dict,
        ["--no-psqlrc", "--no-password", "--quiet", "--set=ON_ERROR_STOP=1", "--file=-"],
    )
    with tempfile.TemporaryFile() as restore_errors, tempfile.TemporaryFile() as psql_errors:
        script = subprocess.Popen(
            [pg_restore, "--no-owner", "--no-privileges", "--file=-", str(dumped)],
            stdout=subprocess.PIPE,
            stderr=restore_errors,
        )
        writer = subprocess.Popen(
            [psql, *args[1:]],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=psql_errors,
            env=_environment(env),
        )
        assert script.stdout is not None and writer.stdin is not None
        sent = _feed(script.stdout, writer.stdin, start, tables, progress)
        if not sent:
            script.kill()  # psql stopped reading: pg_restore would wait on it forever
        script_ok = script.wait() == 0
        if sent:
            # Committed only when the whole script went in and every count matches. After
            # a script cut short (inside a table's rows, perhaps) psql never sees COMMIT,
            # and the transaction it began is rolled back when it ends.
            _send(writer.stdin, (check + "COMMIT;\n") if script_ok else "ROLLBACK;\n")
        with contextlib.suppress(BrokenPipeError):
            writer.stdin.close()
        written = writer.wait() == 0
        if sent and not script_ok:
            raise BackupError(
                "pg_restore could not read the whole dump, so nothing was restored "
                f"({_last_error(_read(restore_errors))})."
            )
        if not sent or not written:
            raise BackupError(
                "Writing the backup into the database failed, and it was left as it was "
                f"({_last_error(_read(psql_errors))})."
            )


def _feed(script: IO[bytes], psql: IO[bytes], start: str, tables: int, progress: Progress) -> bool:
    """Send the script to psql after `start`; False when psql stopped reading (an error)."""
    if not _send(psql, start):
        return False
    with progress.bar("Restoring", total=tables, unit="table") as bar:
        for line in script:
            if line.startswith(DATA_FOR):
                bar.update(1)
            try:
                psql.write(line)
            except BrokenPipeError:
                return False
    return True


def _send(psql: IO[bytes], text: str) -> bool:
    try:
        psql.write(text.encode())
        psql.flush()
    except BrokenPipeError:
        return False
    return True


def _run_dump(args: Sequence[str], connection: Any, *, total: int, progress: Progress) -> None:
    connect, env = DatabaseClient.settings_to_cmd_args_env(connection.settings_dict, [])
    command = [*args, *connect[1:]]
    said: list[str] = []
    with progress.bar("Dumping", total=total, unit="table") as bar:
        process = subprocess.Popen(
            command,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=_environment(env),
        )
        assert process.stderr is not None
        for line in process.stderr:
            if DUMPING in line:
                bar.update(1)
            elif any(word in line for word in ("error:", "detail:", "warning:", "FATAL")):
                said.append(line.strip())
        code = process.wait()
    if code != 0:
        raise BackupError(
            "pg_dump failed: "
            + (" ".join(said[-3:]) or f"it exited with status {code}")
            + " (pg_dump must be of your server's version or newer)."
        )


def _tables(connection: Any, cursor: Any) -> list[str]:
    return sorted(
        info.name for info in connection.introspection.get_table_list(cursor) if info.type == "t"
    )


def _quoter(cursor: Any) -> Any:
    raw = cursor.connection

    def quote(name: str) -> str:
        return str(sql.Identifier(name).as_string(raw))

    return quote


def _literal(text: str) -> str:
    return text.replace("'", "''")


def _environment(extra: dict[str, str] | None) -> dict[str, str]:
    return {**os.environ, **(extra or {})}


def _read(file: IO[bytes]) -> str:
    file.seek(0)
    return file.read().decode(errors="replace")


def _last_error(said: str) -> str:
    lines = [line.strip() for line in said.splitlines() if line.strip()]
    errors = [line for line in lines if "error" in line.lower() or "fatal" in line.lower()]
    return (errors or lines or ["no message"])[0].rstrip(".")
