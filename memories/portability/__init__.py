"""Moving stores: the importers (importers/: the formats Taproot reads), the export (one
person's memories and closings, portable between Taproot servers) and the whole-database
backups and restores (backups/).

This package is portability's one face: the interfaces (the tools, the dashboard, the
admin, the management commands, the bench) import these names from
`memories.portability` and no module inside it. Portability builds on the models, recall
and memories' shared modules and imports nothing of memories.services: the import and
snapshot services write through the unit of work and build on portability, not the other
way round (tests/memories/test_services.py holds these walls). Each name is imported on
first use (`__getattr__`), as memories.recall's are: the importers load without the
backups.
"""

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memories.portability.backups import (
        BackupError,
        Progress,
        default_folder,
        new_index_generation,
        prune,
        recall_index_is_stale,
        restore_backup,
        take_backup,
    )
    from memories.portability.exporting import Export, ExportBusy, export_store
    from memories.portability.importers import SOURCES, file_too_large

__all__ = [
    "SOURCES",
    "BackupError",
    "Export",
    "ExportBusy",
    "Progress",
    "default_folder",
    "export_store",
    "file_too_large",
    "new_index_generation",
    "prune",
    "recall_index_is_stale",
    "restore_backup",
    "take_backup",
]

# The module each name comes from.
_HOMES = {
    "BackupError": "backups",
    "Export": "exporting",
    "ExportBusy": "exporting",
    "Progress": "backups",
    "SOURCES": "importers",
    "default_folder": "backups",
    "export_store": "exporting",
    "file_too_large": "importers",
    "new_index_generation": "backups",
    "prune": "backups",
    "recall_index_is_stale": "backups",
    "restore_backup": "backups",
    "take_backup": "backups",
}


def __getattr__(name: str) -> object:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)
