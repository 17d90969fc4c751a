"""Taking a backup of the whole database while the server runs."""

import subprocess
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections

from memories.portability.backups import postgres, sqlite
from memories.portability.backups.archive import (
    prepare_folder,
    read_archive,
    remove_stale_work,
    write_archive,
)
from memories.portability.backups.errors import BackupError
from memories.portability.backups.manifest import POSTGRESQL, REQUESTED, SQLITE, Manifest
from memories.portability.backups.progress import Progress
from memories.portability.backups.state import people_counts

# A work folder this old belongs to no backup or restore still running.
STALE_WORK = timedelta(days=1)


@dataclass(frozen=True)
class Backup:
    path: Path
    manifest: Manifest


def default_folder() -> Path:
    """Where backups go unless --output says otherwise: `backups/` in the project."""
    return Path(settings.BASE_DIR) / "backups"


def take_backup(
    folder: Path,
    *,
    progress: Progress,
    reason: str = REQUESTED,
    using: str = DEFAULT_DB_ALIAS,
) -> Backup:
    """Back up the whole database into a new file in `folder`: a consistent copy as of
    the moment it starts, while others go on writing. The database file is checked
    before it is packed, and the backup file read back and checked once written."""
    prepare_folder(folder)
    connection = connections[using]
    taken_at = datetime.now(UTC)
    # Work left by a backup or restore killed midway: a whole copy of the database each.
    places = {folder}
    if connection.vendor == "sqlite":
        places.add(Path(connection.settings_dict["NAME"]).parent)
    for place in places:
        if place.is_dir():
            remove_stale_work(place, now=taken_at, older_than=STALE_WORK)
    with tempfile.TemporaryDirectory(dir=folder, prefix=".taproot-") as work:
        if connection.vendor == "sqlite":
            database = Path(work) / "database.sqlite3"
            sqlite.copy_live(Path(connection.settings_dict["NAME"]), database, progress=progress)
            tables, migrations = sqlite.read_copy(
                database, what="The copy of the database", progress=progress
            )
            kind, server_version = SQLITE, sqlite.server_version()
        elif connection.vendor == "postgresql":
            database = Path(work) / "database.pgdump"
            tables, migrations = postgres.dump(connection, database, progress=progress)
            kind, server_version = POSTGRESQL, postgres.server_version(connection)
        else:
            raise BackupError(f"Taproot cannot back up a {connection.vendor} database.")

        def manifest_for(size: int, sha256: str) -> Manifest:
            return Manifest(
                created_at=taken_at,
                reason=reason,
                taproot_version=taproot_version(),
                taproot_commit=taproot_commit(),
                kind=kind,
                server_version=server_version,
                file=database.name,
                size=size,
                sha256=sha256,
                migrations=migrations,
                ranking=str(settings.TAPROOT_RANKING),
                embedder=str(settings.TAPROOT_EMBEDDER),
                counts=people_counts(tables),
                tables=tables,
            )

        if kind == POSTGRESQL:
            postgres.read_dump(
                database, set(tables), what="The dump of the database", progress=progress
            )
        path, manifest = write_archive(
            folder, database, manifest_for, taken_at=taken_at, progress=progress
        )
    read_archive(path, None, progress=progress)
    return Backup(path, manifest)


def taproot_version() -> str:
    try:
        return version("taproot")
    except PackageNotFoundError:
        return "unknown"


def taproot_commit() -> str | None:
    """The commit of the checkout, when it is a git checkout git can read."""
    try:
        found = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=settings.BASE_DIR,
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    commit = found.stdout.strip()
    return commit if found.returncode == 0 and len(commit) == 40 else None
