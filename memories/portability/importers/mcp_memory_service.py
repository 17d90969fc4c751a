"""mcp-memory-service (doobidoo, PyPI `mcp-memory-service`), its SQLite backend: the
`memories` table of its sqlite_vec.db (content_hash, content, tags, memory_type,
metadata, created_at/updated_at in Unix seconds and their _iso forms, deleted_at for a
soft delete). Its other tables (vectors, graph, sync) are not read.

One memory per live row: the content as it is, the tags split on commas, the type mapped
onto Taproot's five categories (TYPE_CATEGORIES) and kept as a tag, the metadata kept in
the provenance. Soft-deleted rows are left out and counted.
"""

import math
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from memories.portability.importers import jsontext
from memories.portability.importers.base import BadFile, Entry, Source, derived_id, provenance
from memories.timeutil import isoformat, parse_timestamp

NAME = "mcp-memory-service"
SOFT_DELETED = "soft-deleted rows"
_READ_HOW = "check that it is mcp-memory-service's SQLite file (sqlite_vec.db)"

# Its ontology (mcp_memory_service.models.ontology): each base type and its subtypes.
TAXONOMY = {
    "observation": "code_edit file_access search command conversation conversation_turn "
    "session document note reference user_correction tool_outcome preference_signal",
    "decision": "architecture tool_choice approach configuration",
    "learning": "insight best_practice anti_pattern gotcha",
    "error": "bug failure exception timeout mistake",
    "pattern": "recurring_issue code_smell design_pattern workflow",
    "planning": "sprint_goal backlog_item story_point_estimate velocity retrospective "
    "standup_note acceptance_criteria",
    "ceremony": "sprint_review sprint_planning daily_standup retrospective_action demo_feedback",
    "milestone": "deliverable dependency risk constraint assumption deadline",
    "stakeholder": "requirement feedback escalation approval change_request status_update",
    "meeting": "action_item attendee_note agenda_item follow_up minutes",
    "research": "finding comparison recommendation source hypothesis",
    "communication": "email_summary chat_summary announcement request response",
}
# Where each base type's memories belong in Taproot (docs/moving-stores.md's table says
# why).
BASE_CATEGORIES = {
    "error": "error",
    "learning": "identity",
    "pattern": "identity",
    "decision": "active_thread",
    "planning": "active_thread",
    "ceremony": "active_thread",
    "milestone": "active_thread",
    "stakeholder": "relationship",
    "observation": "episodic",
    "meeting": "episodic",
    "research": "episodic",
    "communication": "episodic",
}
# Subtypes that say something about the person rather than the work.
PERSONAL = {"preference_signal": "relationship", "user_correction": "relationship"}
TYPE_CATEGORIES = {
    **BASE_CATEGORIES,
    **{
        subtype: BASE_CATEGORIES[base]
        for base, subtypes in TAXONOMY.items()
        for subtype in subtypes.split()
    },
    **PERSONAL,
}
_OPTIONAL = (
    "tags",
    "memory_type",
    "metadata",
    "created_at",
    "updated_at",
    "created_at_iso",
    "updated_at_iso",
    "deleted_at",
)


class McpMemoryService(Source):
    name = NAME
    repeats_refused = False  # one content hash, one memory
    default_category = "episodic"

    def __init__(self, data: bytes, *, owner_id: int) -> None:
        super().__init__()
        self.data = data
        self.owner_id = owner_id
        self._columns = self._check()

    def _open(self) -> sqlite3.Connection:
        connection = sqlite3.connect(":memory:")
        try:
            connection.deserialize(self.data)
            # A file from elsewhere: its schema is only read, never trusted to run code.
            connection.execute("PRAGMA query_only = ON")
            connection.execute("PRAGMA trusted_schema = OFF")
        except sqlite3.Error as error:
            connection.close()
            raise BadFile(f"it is not a readable SQLite database ({error}); {_READ_HOW}") from None
        return connection

    def _check(self) -> list[str]:
        connection = self._open()
        try:
            kind = connection.execute(
                "SELECT type FROM sqlite_master WHERE name = 'memories'"
            ).fetchone()
            if kind is None or kind[0] != "table":
                raise BadFile(f"the database has no 'memories' table; {_READ_HOW}")
            columns = {row[1] for row in connection.execute("PRAGMA table_info(memories)")}
        except sqlite3.Error as error:
            raise BadFile(f"the database cannot be read ({error}); {_READ_HOW}") from None
        finally:
            connection.close()
        missing = {"content_hash", "content"} - columns
        if missing:
            raise BadFile(
                f"its 'memories' table has no {' or '.join(sorted(missing))} column; {_READ_HOW}"
            )
        return [name if name in columns else f"NULL AS {name}" for name in _OPTIONAL]

    def entries(self) -> Iterator[Entry]:
        self.left_out.clear()
        connection = self._open()
        try:
            rows = connection.execute(
                f"SELECT rowid, content_hash, content, {', '.join(self._columns)} "
                "FROM memories ORDER BY rowid"
            )
            for row in rows:
                if row[10] is not None:
                    self.left_out[SOFT_DELETED] += 1
                    continue
                yield self._entry(*row[:10])
        except sqlite3.Error as error:
            raise BadFile(f"the database cannot be read ({error}); {_READ_HOW}") from None
        finally:
            connection.close()

    def _entry(
        self,
        rowid: int,
        content_hash: Any,
        content: Any,
        tags: Any,
        memory_type: Any,
        metadata: Any,
        created: Any,
        updated: Any,
        created_iso: Any,
        updated_iso: Any,
    ) -> Entry:
        label = f"row {rowid}"
        if not isinstance(content_hash, str) or not content_hash.strip():
            raise BadFile(f"{label} has no content_hash")
        kind = memory_type.strip().lower() if isinstance(memory_type, str) else ""
        tag_list = [t.strip() for t in tags.split(",")] if isinstance(tags, str) else []
        tag_list = [t for t in tag_list if t]
        if kind and kind not in tag_list:
            tag_list.append(kind)
        return Entry(
            "memory",
            label,
            {
                "id": derived_id(self.owner_id, NAME, content_hash.strip()),
                "content": content if isinstance(content, str) else None,
                "category": TYPE_CATEGORIES.get(kind),
                "tags": tag_list,
                "created_at": _moment(created, created_iso),
                "updated_at": _moment(updated, updated_iso),
                "provenance": provenance(
                    NAME,
                    content_hash=content_hash.strip(),
                    memory_type=memory_type if isinstance(memory_type, str) else None,
                    metadata=_metadata(metadata, label),
                ),
            },
        )


def _moment(seconds: Any, iso: Any) -> str | None:
    """A row's time: its Unix seconds, else its ISO form; None (the time of the import)
    when it has neither."""
    if isinstance(seconds, int | float) and math.isfinite(seconds):
        try:
            return isoformat(datetime.fromtimestamp(seconds, UTC))
        except (OverflowError, OSError, ValueError):
            pass
    if isinstance(iso, str) and iso.strip():
        try:
            return isoformat(parse_timestamp(iso))
        except (ValueError, OverflowError):
            pass
    return None


def _metadata(value: Any, label: str) -> Any:
    if not isinstance(value, str) or not value.strip():
        return None
    try:
        parsed = jsontext.loads(value, f"{label} has metadata that")
    except ValueError:
        return value  # not JSON: kept as the text it is
    return parsed or None
