"""Helpers for the bulk writes of migrate, import and restore: revisions as unsaved rows
(for bulk_create) and re-indexing in batches."""

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from memories.bulkwrite import WRITE_BATCH
from memories.indexing import Vectors, reindex
from memories.models import Memory, Revision


def revision_for(
    memory: Memory, before: dict[str, Any], *, source: str, action: str, now: datetime
) -> Revision | None:
    """An unsaved revision of this change when a tracked field changed, else None."""
    after = memory.tracked_state()
    changed = [name for name in after if after[name] != before.get(name)]
    if not changed:
        return None
    return Revision(
        memory_id=memory.pk,
        owner_id=memory.owner_id,
        source=source,
        action=action,
        created_at=now,
        changed_fields=changed,
        before=before,
        after=after,
    )


def save_revisions(revisions: Sequence[Revision | None]) -> None:
    Revision.objects.bulk_create([r for r in revisions if r is not None], batch_size=WRITE_BATCH)


def reindex_in_batches(
    memories: Sequence[Memory],
    *,
    text_changed: bool = True,
    new: bool = False,
    vectors: Vectors | None = None,
) -> None:
    for start in range(0, len(memories), WRITE_BATCH):
        reindex(
            memories[start : start + WRITE_BATCH],
            text_changed=text_changed,
            new=new,
            vectors=vectors,
        )
