"""Every model of Taproot, by topic: a memory and its queries (memory), what ranking reads
about it (recall_index), and what happened to a store (history). Import them from here."""

from memories.models.choices import (
    Category,
    ChangeSource,
    EpistemicStatus,
    RevisionAction,
    Salience,
    SuggestionKind,
    Tier,
    User,
)
from memories.models.counts import StoreCount
from memories.models.history import (
    Closing,
    ClosingQuerySet,
    DismissedSuggestion,
    ReflectCall,
    Revision,
    Snapshot,
    SnapshotRecord,
)
from memories.models.memory import Memory, MemoryQuerySet
from memories.models.recall_index import (
    IndexChange,
    MemoryTag,
    MemoryToken,
    MemoryVector,
    RecallEntry,
    RecallIndex,
)

__all__ = [
    "Category",
    "ChangeSource",
    "Closing",
    "ClosingQuerySet",
    "DismissedSuggestion",
    "EpistemicStatus",
    "IndexChange",
    "Memory",
    "MemoryQuerySet",
    "MemoryTag",
    "MemoryToken",
    "MemoryVector",
    "RecallEntry",
    "RecallIndex",
    "ReflectCall",
    "Revision",
    "RevisionAction",
    "Salience",
    "Snapshot",
    "SnapshotRecord",
    "StoreCount",
    "SuggestionKind",
    "Tier",
    "User",
]
