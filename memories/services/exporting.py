"""Export a user's store in the envelope of SPEC §7 (`taproot/1`).

The same envelope as the original Taproot's `/backup` endpoint, so one reader
(memories.services.importing) serves both. Revisions and snapshots are not exported.
"""

from datetime import datetime
from typing import Any

from memories.models import Closing, Memory, User
from memories.services._common import now_or
from memories.timeutil import isoformat

EXPORT_FORMAT = "taproot/1"
MEMORY_PREFIX = "mem:"
CLOSING_PREFIX = "close:"


def memory_value(memory: Memory) -> dict[str, Any]:
    """A memory as exported and snapshotted: every field of SPEC §2 except the owner."""
    return memory.as_record()


def export_store(*, owner: User, now: datetime | None = None) -> dict[str, Any]:
    """Every memory (archived ones included) and every closing of this owner."""
    now = now_or(now)
    entries: list[dict[str, Any]] = [
        {"key": f"{MEMORY_PREFIX}{memory.pk}", "value": memory_value(memory), "metadata": None}
        for memory in Memory.objects.for_owner(owner).order_by("created_at", "id").iterator()
    ]
    entries.extend(
        {"key": f"{CLOSING_PREFIX}{closing.pk}", "value": closing.as_record(), "metadata": None}
        for closing in Closing.objects.for_owner(owner).order_by("created_at", "id").iterator()
    )
    return {
        "format": EXPORT_FORMAT,
        "exported_at": isoformat(now),
        "total_keys": len(entries),
        "entries": entries,
    }
