"""Every write (and the reads the tools share) lives here, once, for all interfaces.

Each function is keyword-only, acts for exactly one owner, runs in one transaction, and
raises memories.errors.InvalidInput before changing anything when the input is bad.
"""

from memories.services.closings import close
from memories.services.curation import (
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
from memories.services.loaded import record_reflect, reflect_hint, reflect_history
from memories.services.normalise import migrate
from memories.services.recall import rank_memories, recall
from memories.services.reflect import reflect, status
from memories.services.remember import remember
from memories.services.suggestions import apply_suggestion, dismiss_suggestion, suggestions

__all__ = [
    "apply_suggestion",
    "archive",
    "close",
    "compress",
    "delete",
    "dismiss_suggestion",
    "edit_gist",
    "forget",
    "migrate",
    "promote",
    "rank_memories",
    "recall",
    "record_reflect",
    "reflect",
    "reflect_hint",
    "reflect_history",
    "remember",
    "restore_revision",
    "set_curation",
    "status",
    "suggestions",
    "unarchive",
]
