"""The services: every write, and every read the interfaces share, defined once. The MCP
tools, the dashboard, the admin and the management commands call them from this package
and import nothing below it; what is not a service (a rule, a query, a model method)
belongs elsewhere in memories.

Each service is keyword-only and takes domain values: the owner, model choices
(Category, Salience…), text, datetimes, memory references (memories.refs: a whole id or an
IdPrefix) and small frozen dataclasses (MemoryDraft, RecallFilters). Reading what an
interface received into those values is that interface's work (mcp_bridge.coercion for
the tools, forms for the dashboard and the admin). A service refuses with a
memories.errors.DomainError that carries data, before changing anything, and each
interface words it for its reader. It acts for the `owner` it is given; `migrate` and
`restore_snapshot` also accept owner=None, the operator acting for every user.

A write opens its own transaction. Those that embed text first (remember, the edits of a
gist, compress, restoring a revision) must be the outermost, and say so with
`atomic(durable=True)`: inside another transaction, embedding would hold SQLite's one
write lock. They return what they wrote: a model instance (Memory, Closing) or a small
frozen dataclass around it (Remembered, Changed, Compressed, Restored, Recalled); the
store-wide writes return what they did (Imported, Migrated, SnapshotRestored). The export
and the whole-database backups are not services: they move stores, and live with the
importers in memories.portability.
`preview_restore` reads what `restore_revision` would change (a RestorePreview), which
the restore can then be held to.

A read that an interface lays out returns plain values (ReflectPayload, ReflectHistory,
SuggestionGroup, Ranking) or a str, and `status` a StoreStatus. No service builds a reply: the
tools' JSON is made in mcp_bridge.tools (one module per tool), the pages' words in dashboard.
"""

from memories.services.closings import close
from memories.services.curation import (
    Changed,
    Compressed,
    Restored,
    RestorePreview,
    archive,
    compress,
    delete,
    edit,
    edit_gist,
    preview_restore,
    promote,
    restore_revision,
    set_curation,
    unarchive,
)
from memories.services.import_runs import recover_interrupted_imports
from memories.services.importing import Imported, import_store
from memories.services.loaded import (
    LastLoads,
    ReflectDue,
    ReflectHistory,
    last_loads,
    record_reflect,
    reflect_due,
    reflect_history,
)
from memories.services.normalise import Migrated, OwnerMigrated, migrate
from memories.services.recall import Hit, Recalled, RecallFilters, rank_memories, recall
from memories.services.reflect import StoreStatus, reflect, status
from memories.services.remember import Duplicate, MemoryDraft, Remembered, remember
from memories.services.snapshot_restore import SnapshotRestored, restore_snapshot
from memories.services.snapshots import snapshot_summary, take_snapshot
from memories.services.suggestions import (
    SuggestionGroup,
    apply_suggestion,
    dismiss_suggestion,
    suggestions,
)

__all__ = [
    "Changed",
    "Compressed",
    "Duplicate",
    "Hit",
    "Imported",
    "LastLoads",
    "MemoryDraft",
    "Migrated",
    "OwnerMigrated",
    "RecallFilters",
    "Recalled",
    "ReflectDue",
    "ReflectHistory",
    "Remembered",
    "RestorePreview",
    "Restored",
    "SnapshotRestored",
    "StoreStatus",
    "SuggestionGroup",
    "apply_suggestion",
    "archive",
    "close",
    "compress",
    "delete",
    "dismiss_suggestion",
    "edit",
    "edit_gist",
    "import_store",
    "last_loads",
    "migrate",
    "preview_restore",
    "promote",
    "rank_memories",
    "recall",
    "record_reflect",
    "recover_interrupted_imports",
    "reflect",
    "reflect_due",
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
