"""Helpers shared by the service modules (not part of their public surface): the clock,
the owner-scoped memory lookup, the one way revisions are kept, and re-indexing in
batches."""

import uuid
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from django.utils import timezone

from memories.bulkwrite import WRITE_BATCH
from memories.errors import UnknownMemory
from memories.models import ChangeSource, Memory, Revision, RevisionAction, User
from memories.recall.indexing import Vectors, reindex
from memories.refs import MemoryRef
from memories.shortids import resolve_memory_id


def now_or(now: datetime | None) -> datetime:
    return now if now is not None else timezone.now()


def get_memory(owner: User, ref: MemoryRef, *, for_update: bool = False) -> Memory:
    """The caller's memory with this id (or unique id prefix); a foreign id is as unknown
    as a made-up one."""
    pk = resolve_memory_id(owner, ref)
    queryset = Memory.objects.for_owner(owner)
    if for_update:
        queryset = queryset.select_for_update()
    memory = queryset.filter(pk=pk).first()
    if memory is None:
        raise UnknownMemory(pk)
    return memory


def record_revisions(
    changes: Iterable[tuple[Memory, dict[str, Any]]],
    *,
    source: ChangeSource | str,
    action: RevisionAction | str,
    now: datetime,
) -> None:
    """Keep a revision of each (memory, before) whose tracked fields changed: `before` is
    the memory's `tracked_state()` before the change. One change or thousands, they are
    written in bulk."""
    revisions = []
    for memory, before in changes:
        after = memory.tracked_state()
        changed = [name for name in after if after[name] != before.get(name)]
        if changed:
            revisions.append(
                Revision(
                    memory_id=memory.pk,
                    owner_id=memory.owner_id,
                    source=source,
                    action=action,
                    created_at=now,
                    changed_fields=changed,
                    before=before,
                    after=after,
                )
            )
    Revision.objects.bulk_create(revisions, batch_size=WRITE_BATCH)


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


def distinct(ids: Iterable[uuid.UUID]) -> list[uuid.UUID]:
    """The ids in the order given, each once."""
    return list(dict.fromkeys(ids))
