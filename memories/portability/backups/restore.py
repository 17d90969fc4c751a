"""Restoring a backup into an empty database (or, when asked, over one that holds data,
after backing that up). The whole file is checked first — its checksum, the database
inside it, the schema it is at — so that a damaged, cut-short or foreign file is refused
before anything changes. Migrating and rebuilding the recall index come after, from the
command (restore_taproot)."""

import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections

from memories.conf import embedder, ranking_profile
from memories.models import Memory, MemoryVector, RecallIndex
from memories.portability.backups import postgres, sqlite
from memories.portability.backups.archive import read_archive
from memories.portability.backups.backup import Backup, take_backup
from memories.portability.backups.errors import BackupError
from memories.portability.backups.manifest import (
    BEFORE_RESTORE,
    KINDS,
    POSTGRESQL,
    SQLITE,
    Manifest,
)
from memories.portability.backups.progress import Progress
from memories.portability.backups.state import (
    check_migrations_known,
    check_no_foreign_objects,
    describe_held,
    held_data,
)
from memories.recall.indexing import index_mismatch


@dataclass(frozen=True)
class Restored:
    manifest: Manifest
    # What the database held before, backed up (with --force), or None when it was empty.
    before: Backup | None


def restore_backup(
    path: Path,
    *,
    force: bool,
    folder: Path,
    progress: Progress,
    using: str = DEFAULT_DB_ALIAS,
) -> Restored:
    """Put the database in the backup at `path` in place of what the database holds.

    Refused (BackupError, nothing changed) when the file is not a sound Taproot backup of
    this kind of database at a schema this Taproot knows, or when the database holds data
    and `force` is off. With `force`, what it holds is first backed up into `folder`.
    """
    connection = connections[using]
    kind = {"sqlite": SQLITE, "postgresql": POSTGRESQL}.get(connection.vendor)
    if kind is None:
        raise BackupError(f"Taproot cannot restore into a {connection.vendor} database.")
    target = Path(connection.settings_dict["NAME"]) if kind == SQLITE else None
    # Beside a SQLite database, whose folder has room for it; else the system's.
    workplace = target.parent if target is not None and target.parent.is_dir() else None
    with tempfile.TemporaryDirectory(dir=workplace, prefix=".taproot-restore-") as work:
        manifest, database = read_archive(path, Path(work), progress=progress)
        assert database is not None  # extracted into the work folder
        if manifest.kind != kind:
            raise BackupError(
                f"{path} is a backup of a {manifest.kind_name} database, and DATABASE_URL "
                f"names a {KINDS[kind]} one. Restore it into a {manifest.kind_name} database."
            )
        made_by = f"Taproot {manifest.taproot_version}" + (
            f", commit {manifest.taproot_commit[:12]}" if manifest.taproot_commit else ""
        )
        check_migrations_known(manifest.migrations, made_by)
        if target is not None:
            tables, _ = sqlite.read_copy(
                database, what=f"The database in {path}", progress=progress
            )
            if tables != manifest.tables:
                raise BackupError(
                    f"{path} is damaged: its database does not hold the rows its manifest lists."
                )
            check_no_foreign_objects(sqlite.triggers_and_views(database), path, vendor="sqlite")
            held = held_data(sqlite.held_rows(target))
        else:
            data_tables = postgres.read_dump(
                database, set(manifest.tables), what=f"The database in {path}", progress=progress
            )
            check_no_foreign_objects(
                postgres.triggers_and_views(database), path, vendor="postgresql"
            )
            held = held_data(postgres.held_rows(connection))
        before = None
        if held:
            if not force:
                raise BackupError(
                    f"The database DATABASE_URL names is not empty: it holds "
                    f"{describe_held(held)}. restore_taproot restores into an empty database: "
                    "point DATABASE_URL at a new one, or add --force to replace what it holds "
                    "(which is backed up first)."
                )
            before = take_backup(folder, progress=progress, reason=BEFORE_RESTORE, using=using)
        connection.close()
        if target is not None:
            sqlite.restore_into(database, target, progress=progress)
        else:
            postgres.restore(connection, database, manifest, tables=data_tables, progress=progress)
    _forget_connections(using)
    return Restored(manifest, before)


def new_index_generation() -> None:
    """Give every recall index a new generation, so no running worker mistakes the
    vectors it holds of the old store for those of the restored one."""
    RecallIndex.objects.update(generation=uuid.uuid4())


def recall_index_is_stale(manifest: Manifest) -> str | None:
    """Why the restored recall index does not fit this server's ranking profile and
    embedder (so reindex_taproot must rebuild it), or None when it does."""
    profile = ranking_profile().name
    if index_mismatch() or manifest.ranking != profile:
        return (
            f"the backup's recall index was built for the {manifest.ranking!r} ranking "
            f"profile, and TAPROOT_RANKING is {profile!r} here"
        )
    semantic = embedder()
    if semantic is None:
        return None  # recall by words alone reads no vector
    current = str(settings.TAPROOT_EMBEDDER)
    if manifest.embedder != current:
        return (
            f"the backup's memories were embedded with TAPROOT_EMBEDDER={manifest.embedder!r}, "
            f"and it is {current!r} here"
        )
    vectors = MemoryVector.objects.filter(embedder=semantic.name)
    if MemoryVector.objects.exclude(embedder=semantic.name).exists() or (
        vectors.count() < Memory.objects.count()
    ):
        return f"some of the backup's memories have no vector of the {semantic.name} embedder"
    return None


def _forget_connections(using: str) -> None:
    """The tables were replaced under this process's connections: open new ones."""
    connection = connections[using]
    connection.close()
    close_pool = getattr(connection, "close_pool", None)
    if close_pool is not None:
        close_pool()
