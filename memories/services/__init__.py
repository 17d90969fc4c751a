"""Every write (and the reads the tools share) lives here, once, for all interfaces.

Each function is keyword-only, acts for exactly one owner, runs in one transaction, and
raises memories.errors.InvalidInput before changing anything when the input is bad.
"""

from memories.services.closings import close
from memories.services.curation import (
    FORGET_ACTIONS,
    archive,
    compress,
    delete,
    edit_gist,
    forget,
    promote,
    restore_revision,
    set_curation,
    unarchive,
)
from memories.services.exporting import Export, ExportBusy, export_store
from memories.services.importing import import_store
from memories.services.loaded import ReflectHistory, record_reflect, reflect_hint, reflect_history
from memories.services.normalise import migrate
from memories.services.recall import parse_filters, rank_memories, recall
from memories.services.reflect import reflect, status
from memories.services.remember import remember
from memories.services.snapshots import restore_snapshot, snapshot_summary, take_snapshot
from memories.services.suggestions import (
    SuggestionGroup,
    apply_suggestion,
    dismiss_suggestion,
    suggestions,
)

__all__ = [
    "FORGET_ACTIONS",
    "Export",
    "ExportBusy",
    "ReflectHistory",
    "SuggestionGroup",
    "apply_suggestion",
    "archive",
    "close",
    "compress",
    "delete",
    "dismiss_suggestion",
    "edit_gist",
    "export_store",
    "forget",
    "import_store",
    "migrate",
    "parse_filters",
    "promote",
    "rank_memories",
    "recall",
    "record_reflect",
    "reflect",
    "reflect_hint",
    "reflect_history",
    "remember",
    "restore_revision",
    "restore_snapshot",
    "set_curation",
    "snapshot_summary",
    "status",
    "suggestions",
    "take_snapshot",
    "unarchive",
]
