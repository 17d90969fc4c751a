"""The services: every write, and every read the interfaces share, defined once. The MCP
tools, the dashboard, the admin and the management commands call them from this package
and import nothing below it; what is not a service (a rule, a query, a model method)
belongs elsewhere in memories.

Each service is keyword-only, raises memories.errors.InvalidInput before changing
anything when its input is bad, and makes its writes in one transaction. It acts for the
`owner` it is given; `migrate` and `restore_snapshot` also accept owner=None, the operator
acting for every user (migrate then normalises each user's memories in a transaction of
their own; restore_snapshot restores any user's snapshot).

What a service returns (an interface never gets a model instance back):

- A write returns its reply: a JSON-ready dict with "status": "ok", the ids it touched
  (as strings) and what it set, plus "warnings" or a "message" when it has any. The tools
  send it as it is; the dashboard, the admin and the commands take what they need from
  it and read the rows they show through their own owner-scoped queries. `recall` and
  `status`, which the tools send as they are, answer the same way.
- A read that an interface lays out returns plain values: a frozen dataclass
  (ReflectPayload, ReflectHistory, SuggestionGroup, Ranking, RecallFilters) or a str.
  An export is the document itself: `export_store` returns it whole, `Export` streams
  its text.
- Two steps answer no one: `take_snapshot`, which migrate, import and restore take inside
  their own transactions, returns the Snapshot row it wrote, and `record_reflect`, the
  note taproot_reflect leaves, returns None.
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
