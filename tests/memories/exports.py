"""Helpers for the export tests: the whole document as it was built before the export
streamed, and stores written in bulk."""

import json

from memories.models import Closing, Memory
from tests.conftest import NOW


def whole_document(owner, exported_at):
    """The export as it was built before it streamed: every entry in one document."""
    entries = [
        {"key": f"mem:{m.pk}", "value": m.as_record(), "metadata": None}
        for m in Memory.objects.filter(owner=owner).order_by("created_at", "id")
    ]
    entries += [
        {"key": f"close:{c.pk}", "value": c.as_record(), "metadata": None}
        for c in Closing.objects.filter(owner=owner).order_by("created_at", "id")
    ]
    return {
        "format": "taproot/1",
        "exported_at": exported_at,
        "total_keys": len(entries),
        "entries": entries,
    }


def compact(document):
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False)


def indented(document):
    return json.dumps(document, ensure_ascii=False, indent=1)


def bulk_memories(owner, n, *, content="", created_at=NOW, **fields):
    """n memories written in one statement (the export reads no index)."""
    rows = [
        Memory(
            owner=owner,
            category="episodic",
            content=f"Memory {i}. {content}",
            gist=f"Memory {i}",
            created_at=created_at,
            updated_at=created_at,
            last_touched_at=created_at,
            **fields,
        )
        for i in range(n)
    ]
    Memory.objects.bulk_create(rows, batch_size=500)
    return rows
