"""Whole-database backups and restores (backup_taproot, restore_taproot): every account,
OAuth client and token, memory, revision, snapshot, closing and recall index, of SQLite
or PostgreSQL, as one checked file. An export (export_taproot) is something else: one
person's memories and closings, portable between Taproot servers."""

from memories.portability.backups.archive import backups_in, prune
from memories.portability.backups.backup import Backup, default_folder, take_backup
from memories.portability.backups.errors import BackupError
from memories.portability.backups.manifest import Manifest
from memories.portability.backups.progress import Progress
from memories.portability.backups.restore import (
    Restored,
    new_index_generation,
    recall_index_is_stale,
    restore_backup,
)

__all__ = [
    "Backup",
    "BackupError",
    "Manifest",
    "Progress",
    "Restored",
    "backups_in",
    "default_folder",
    "new_index_generation",
    "prune",
    "recall_index_is_stale",
    "restore_backup",
    "take_backup",
]
