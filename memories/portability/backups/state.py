"""What a database holds, read through a plain DB-API cursor: the rows of every table,
the migrations applied, and the counts people read. The backup reads them inside the very
snapshot it copies; the restore reads them from the copy it is about to write back."""

from collections.abc import Callable, Iterable
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db.migrations.loader import MigrationLoader

from memories.models import Closing, Memory, Revision, Snapshot
from memories.portability.backups.errors import BackupError
from memories.portability.backups.manifest import counted

# Tables that `migrate` fills by itself (and the cache's, which holds only throttling
# counters): rows there do not make a database "hold data".
MIGRATE_FILLS = {"django_migrations", "django_content_type", "auth_permission"}


def counted_models() -> dict[str, Any]:
    """The counts a manifest shows people, by the table each is read from."""
    return {
        "accounts": get_user_model(),
        "memories": Memory,
        "revisions": Revision,
        "snapshots": Snapshot,
        "closings": Closing,
    }


def people_counts(tables: dict[str, int]) -> dict[str, int]:
    return {name: tables.get(model._meta.db_table, 0) for name, model in counted_models().items()}


def table_rows(cursor: Any, tables: Iterable[str], quote: Callable[[str], str]) -> dict[str, int]:
    rows = {}
    for table in sorted(tables):
        cursor.execute(f"SELECT count(*) FROM {quote(table)}")
        rows[table] = int(cursor.fetchone()[0])
    return rows


def applied_migrations(cursor: Any, tables: Iterable[str]) -> dict[str, list[str]]:
    if "django_migrations" not in set(tables):
        return {}
    cursor.execute("SELECT app, name FROM django_migrations ORDER BY app, id")
    applied: dict[str, list[str]] = {}
    for app, name in cursor.fetchall():
        applied.setdefault(app, []).append(name)
    return applied


def cache_tables() -> set[str]:
    return {
        str(cache["LOCATION"])
        for cache in settings.CACHES.values()
        if cache["BACKEND"].endswith("DatabaseCache")
    }


def held_data(rows: dict[str, int]) -> dict[str, int]:
    """The tables with rows, leaving out what `migrate` writes by itself."""
    ignored = MIGRATE_FILLS | cache_tables()
    return {table: count for table, count in rows.items() if count and table not in ignored}


def describe_held(rows: dict[str, int]) -> str:
    counts = {name: count for name, count in people_counts(rows).items() if count}
    if counts:
        return counted(counts)
    return ", ".join(f"{count} rows in {table}" for table, count in sorted(rows.items())[:3])


def check_migrations_known(applied: dict[str, list[str]], made_by: str) -> None:
    """Refuse a backup whose schema is newer than this checkout's: migrations it has that
    this Taproot does not know (a restore could not migrate it, and the code would not
    understand it)."""
    known = set(MigrationLoader(None, ignore_no_migrations=True).disk_migrations)
    unknown = [
        f"{app}.{name}"
        for app, names in applied.items()
        for name in names
        if (app, name) not in known
    ]
    if unknown:
        shown = ", ".join(unknown[:5]) + (
            f" and {len(unknown) - 5} more" if len(unknown) > 5 else ""
        )
        raise BackupError(
            f"The backup was made by a newer Taproot ({made_by}): its database has migrations "
            f"this one does not know ({shown}). Update this checkout (`git pull`, or check out "
            "the commit the backup names) and run the restore again."
        )


# The triggers and views Taproot's migrations make: the ones that keep the store's counts
# (memories.models.counts_sql). A backup holding others was changed after it was made (its
# manifest recomputed to match), and code in a trigger runs on every write of the restored
# server. tests/backups/test_restore.py checks this against what the migrations make on
# both databases.
MIGRATION_MADE_TRIGGERS_AND_VIEWS: dict[str, frozenset[str]] = {
    "sqlite": frozenset(
        f"trigger {name} on memories_memory"
        for name in ("storecount_insert", "storecount_delete", "storecount_update")
    ),
    "postgresql": frozenset(
        f"trigger {name} on memories_memory"
        for name in ("storecount_insert_delete", "storecount_update")
    ),
}


def check_no_foreign_objects(found: Iterable[str], path: object, *, vendor: str) -> None:
    """BackupError naming the triggers and views in a backup that the migrations did not
    make; `found` names each as "trigger NAME on TABLE" or "view NAME"."""
    foreign = sorted(set(found) - MIGRATION_MADE_TRIGGERS_AND_VIEWS[vendor])
    if foreign:
        raise BackupError(
            f"{path} is refused: its database holds {', '.join(foreign[:5])}, which "
            "Taproot's migrations do not make, so it was changed after it was made. "
            "Restore a backup backup_taproot wrote."
        )
