"""Snapshots: the records as they were before a bulk change, and putting them back.

A snapshot's `records` document says what it covers:

    {"whole_store": bool, "memories": [<memory value>], "closings": [<closing value>]}

Memory and closing values are those of the export (memories.portability.exporting), so they
hold every field exactly, drift included.

- A snapshot of some records (`whole_store: false`; migrate takes these of the memories it
  is about to change) covers just those memories. Restoring it puts each of them back as
  it was (re-creating any deleted since) and leaves every other record alone.
- A snapshot of the whole store (`whole_store: true`; taken before an import and before
  every restore) covers every memory and closing the user had. Restoring it returns the
  store to that moment: records made since (say, by an import) are removed.

Every restore first takes a snapshot of the present ("before-restore"), so a restore can
itself be undone by restoring that one.

Snapshots taken since imports write in batches keep their records in rows
(SnapshotRecord), written and read a batch at a time, so their cost does not grow with
the store: an import's ("before-import") holds the memories it normalised as they were
and the ids of the records it created; restoring it puts the first back and removes the
second, leaving everything else alone. Its "before-restore" holds what that restore
changes. An account keeps its newest KEEP_SNAPSHOTS snapshots.
"""

import contextlib
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import Count, F

from memories.bulkwrite import WRITE_BATCH, update_rows
from memories.errors import (
    InvalidInput,
    SnapshotInProgress,
    SnapshotRecordTaken,
    UnknownSnapshot,
    UnreadableSnapshot,
)
from memories.models import (
    ChangeSource,
    Closing,
    Memory,
    RecallIndex,
    Snapshot,
    SnapshotRecord,
    User,
)
from memories.portability.exporting import memory_value
from memories.quoting import shown
from memories.recall.indexing import refresh_hashes, unindex
from memories.services._common import now_or, record_revisions, reindex_in_batches
from memories.services.unit_of_work import embed_ahead
from memories.timeutil import parse_timestamp
from memories.vocabulary import DERIVED_FIELDS, RECORD_FIELDS, last_touch_of

# A snapshot value holds a memory's every field, all written back by a restore (the id
# stays), with the bookkeeping derived from them recomputed.
RESTORED_FIELDS = (*RECORD_FIELDS, *DERIVED_FIELDS)
_TIMESTAMPS = ("created_at", "updated_at", "last_retrieved", "archived_at")
# Snapshots an account keeps: the newest, whatever took them. Enough to undo the last few
# imports, migrations and restores; older ones only cost space (a whole-store snapshot of
# 150,000 memories took 106 MB).
KEEP_SNAPSHOTS = 10
# What `records` says of a snapshot kept in rows.
IN_ROWS = {"whole_store": False, "rows": True}
Kind = SnapshotRecord.Kind


def kept_in_rows(snapshot: Snapshot) -> bool:
    return isinstance(snapshot.records, dict) and bool(snapshot.records.get("rows"))


def start_snapshot(
    *, owner_id: int, reason: str, now: datetime, in_progress: bool = False, worker: str = ""
) -> Snapshot:
    """A snapshot kept in rows, empty: its records are added with keep_values and
    keep_created as the change goes."""
    return Snapshot.objects.create(
        owner_id=owner_id,
        created_at=now,
        reason=reason,
        records=IN_ROWS,
        in_progress=in_progress,
        worker=worker,
        heartbeat_at=now if in_progress else None,
    )


def keep_values(
    snapshot: Snapshot, *, memories: Iterable[Memory] = (), closings: Iterable[Closing] = ()
) -> None:
    """Add these records, as they are now, to a snapshot kept in rows."""
    rows = [
        SnapshotRecord(snapshot=snapshot, kind=Kind.MEMORY, record_id=m.pk, value=memory_value(m))
        for m in memories
    ]
    rows += [
        SnapshotRecord(snapshot=snapshot, kind=Kind.CLOSING, record_id=c.pk, value=c.as_record())
        for c in closings
    ]
    SnapshotRecord.objects.bulk_create(rows, batch_size=WRITE_BATCH)
    memories_kept = sum(1 for row in rows if row.kind == Kind.MEMORY)
    if memories_kept:
        Snapshot.objects.filter(pk=snapshot.pk).update(
            memory_count=F("memory_count") + memories_kept
        )


def keep_created(
    snapshot: Snapshot, *, memories: Iterable[uuid.UUID] = (), closings: Iterable[uuid.UUID] = ()
) -> None:
    """Add the ids of records the change created to a snapshot kept in rows: restoring it
    removes them."""
    rows = [
        SnapshotRecord(snapshot=snapshot, kind=Kind.CREATED_MEMORY, record_id=i) for i in memories
    ]
    rows += [
        SnapshotRecord(snapshot=snapshot, kind=Kind.CREATED_CLOSING, record_id=i) for i in closings
    ]
    SnapshotRecord.objects.bulk_create(rows, batch_size=WRITE_BATCH)


def rows_of(snapshot: Snapshot, kind: str) -> Iterator[list[SnapshotRecord]]:
    """A snapshot's rows of one kind, a batch at a time (in the order they were kept)."""
    after = 0
    while True:
        batch = list(
            SnapshotRecord.objects.filter(snapshot=snapshot, kind=kind, pk__gt=after).order_by(
                "pk"
            )[:WRITE_BATCH]
        )
        if not batch:
            return
        yield batch
        after = batch[-1].pk


def prune_snapshots(owner_id: int) -> int:
    """Delete all but the account's newest KEEP_SNAPSHOTS complete snapshots (an import's
    in progress is never one of them); how many went."""
    kept = Snapshot.objects.filter(owner_id=owner_id, in_progress=False).order_by(
        "-created_at", "-id"
    )
    doomed = list(kept.values_list("pk", flat=True)[KEEP_SNAPSHOTS:])
    for start in range(0, len(doomed), WRITE_BATCH):
        chunk = doomed[start : start + WRITE_BATCH]
        SnapshotRecord.objects.filter(snapshot_id__in=chunk).delete()
        Snapshot.objects.filter(pk__in=chunk).delete()
    return len(doomed)


def take_snapshot(
    *,
    owner_id: int,
    reason: str,
    now: datetime,
    memories: list[Memory] | None = None,
) -> Snapshot:
    """Keep these memories as they are now, or (memories=None) the owner's whole store."""
    whole_store = memories is None
    closings: list[dict[str, Any]] = []
    if memories is None:
        memories = list(Memory.objects.filter(owner_id=owner_id).order_by("created_at", "id"))
        closings = [
            c.as_record()
            for c in Closing.objects.filter(owner_id=owner_id).order_by("created_at", "id")
        ]
    return Snapshot.objects.create(
        owner_id=owner_id,
        created_at=now,
        reason=reason,
        memory_count=len(memories),
        records={
            "whole_store": whole_store,
            "memories": [memory_value(m) for m in memories],
            "closings": closings,
        },
    )


def snapshot_summary(snapshot: Snapshot) -> str:
    """One line for people: what a snapshot holds and what restoring it does."""
    if kept_in_rows(snapshot):
        return _rows_summary(snapshot)
    records = snapshot.records if isinstance(snapshot.records, dict) else {}
    memories = len(records.get("memories") or [])
    closings = len(records.get("closings") or [])
    if records.get("whole_store"):
        return (
            f"The whole store: {memories} memories and {closings} closings. Restoring it "
            "returns the store to this moment (records made since are removed)."
        )
    return (
        f"{memories} memories as they were. Restoring it puts them back and leaves every "
        "other record alone."
    )


def _rows_summary(snapshot: Snapshot) -> str:
    counts = dict(
        SnapshotRecord.objects.filter(snapshot=snapshot)
        .values_list("kind")
        .annotate(n=Count("pk"))
        .values_list("kind", "n")
    )
    kept = counts.get(Kind.MEMORY, 0)
    created = counts.get(Kind.CREATED_MEMORY, 0)
    closings_kept = counts.get(Kind.CLOSING, 0)
    closings_created = counts.get(Kind.CREATED_CLOSING, 0)
    parts = []
    if kept or closings_kept:
        parts.append(f"puts back {kept} memories and {closings_kept} closings as they were")
    if created or closings_created:
        parts.append(f"removes the {created} memories and {closings_created} closings made since")
    if not parts:
        return "Nothing to put back: restoring it changes nothing."
    return f"Restoring it {' and '.join(parts)}, and leaves every other record alone."


@dataclass(frozen=True)
class SnapshotRestored:
    """What restoring a snapshot did."""

    snapshot: Snapshot
    restored: int  # memories put back over the present ones
    recreated: int  # memories deleted since, made again
    removed: int  # memories made since a whole-store snapshot, removed
    closings_restored: int
    closings_removed: int
    before_restore: Snapshot  # the present as it was: restoring it undoes this restore

    @property
    def message(self) -> str:
        """What happened, in a sentence for the operator's tools."""
        return (
            f"Restored snapshot {self.snapshot.pk} ({self.snapshot.reason}). The state before "
            f"the restore is kept in snapshot {self.before_restore.pk}."
        )


def restore_snapshot(
    *,
    # Any: the operator types it on the command line, and the service says when it is not
    # a number (one message for the command and the admin's instructions alike).
    snapshot_id: Any,
    owner: User | None = None,
    now: datetime | None = None,
) -> SnapshotRestored:
    """Put a snapshot's records back exactly, after snapshotting the present state.

    owner=None is the operator (any user's snapshot); otherwise only the owner's own.
    """
    now = now_or(now)
    snapshot = _find_snapshot(snapshot_id, owner)
    if kept_in_rows(snapshot):
        return _restore_rows(snapshot, now)
    owner_id = snapshot.owner_id
    whole_store, memories, closings = _parse_records(snapshot)
    ahead = embed_ahead(memories)  # before the write transaction
    with transaction.atomic():
        safety = take_snapshot(owner_id=owner_id, reason="before-restore", now=now)
        ids = [m.pk for m in memories]
        foreign = _first_foreign(Memory, ids, owner_id)
        if foreign is not None:
            raise SnapshotRecordTaken(snapshot.pk, "memory", foreign)
        mine = Memory.objects.filter(owner_id=owner_id).order_by("pk").select_for_update()
        if whole_store:
            # Every memory of the owner, those to remove too, locked before the index is
            # touched: other writes lock a memory first and the index after, so this order
            # never waits on one of them crosswise.
            list(mine.values_list("pk", flat=True))
        present = mine.in_bulk(ids)
        existing = [m for m in memories if m.pk in present]
        missing = [m for m in memories if m.pk not in present]
        update_rows(existing, RESTORED_FIELDS)
        Memory.objects.bulk_create(missing, batch_size=WRITE_BATCH)
        record_revisions(
            [(m, present[m.pk].tracked_state()) for m in existing],
            source=ChangeSource.ADMIN,
            action="restore snapshot",
            now=now,
        )
        reindex_in_batches(memories, vectors=ahead)
        _forget_normalised(owner_id)
        removed = closings_removed = closings_restored = 0
        if whole_store:
            removed = _remove_memories_not_in(owner_id, set(ids))
            closings_restored, closings_removed = _restore_closings(snapshot, closings)
    return SnapshotRestored(
        snapshot=snapshot,
        restored=len(existing),
        recreated=len(missing),
        removed=removed,
        closings_restored=closings_restored,
        closings_removed=closings_removed,
        before_restore=safety,
    )


@dataclass
class Undone:
    restored: int = 0
    recreated: int = 0
    removed: int = 0
    closings_restored: int = 0
    closings_removed: int = 0


def _restore_rows(snapshot: Snapshot, now: datetime) -> SnapshotRestored:
    if snapshot.in_progress:
        raise SnapshotInProgress(snapshot.pk)
    with transaction.atomic():
        safety = start_snapshot(owner_id=snapshot.owner_id, reason="before-restore", now=now)
        undone = undo_rows(snapshot, now=now, safety=safety)
    prune_snapshots(snapshot.owner_id)
    return SnapshotRestored(
        snapshot=snapshot,
        restored=undone.restored,
        recreated=undone.recreated,
        removed=undone.removed,
        closings_restored=undone.closings_restored,
        closings_removed=undone.closings_removed,
        before_restore=safety,
    )


def undo_rows(
    snapshot: Snapshot, *, now: datetime, safety: Snapshot | None, batched: bool = False
) -> Undone:
    """Put a snapshot kept in rows back: remove the records it says were created, put
    back the values it holds (re-creating what was deleted since), a batch at a time.

    With `safety`, what this changes is kept there first, so restoring it undoes this.
    `batched`: each batch in a transaction of its own (an interrupted import's undo, which
    must not hold SQLite's write lock for long; run again, it finishes the job), else all
    in the caller's.
    """
    owner_id = snapshot.owner_id
    undone = Undone()

    def step() -> Any:
        return transaction.atomic() if batched else contextlib.nullcontext()

    for batch in rows_of(snapshot, Kind.CREATED_MEMORY):
        with step():
            mine = Memory.objects.filter(owner_id=owner_id, pk__in=[r.record_id for r in batch])
            doomed = list(mine.order_by("pk").select_for_update())
            if safety is not None:
                keep_values(safety, memories=doomed)
            unindex([m.pk for m in doomed])
            Memory.objects.filter(pk__in=[m.pk for m in doomed]).delete()
            undone.removed += len(doomed)
    for batch in rows_of(snapshot, Kind.CREATED_CLOSING):
        with step():
            mine_closings = Closing.objects.filter(
                owner_id=owner_id, pk__in=[r.record_id for r in batch]
            )
            doomed_closings = list(mine_closings.order_by("pk"))
            if safety is not None:
                keep_values(safety, closings=doomed_closings)
            Closing.objects.filter(pk__in=[c.pk for c in doomed_closings]).delete()
            undone.closings_removed += len(doomed_closings)
    for batch in rows_of(snapshot, Kind.MEMORY):
        with step():
            _put_back_memories(snapshot, batch, now=now, safety=safety, undone=undone)
    for batch in rows_of(snapshot, Kind.CLOSING):
        with step():
            _put_back_closings(snapshot, batch, safety=safety, undone=undone)
    return undone


def _put_back_memories(
    snapshot: Snapshot,
    batch: list[SnapshotRecord],
    *,
    now: datetime,
    safety: Snapshot | None,
    undone: Undone,
) -> None:
    owner_id = snapshot.owner_id
    try:
        memories = [memory_from_value(_value(r), owner_id=owner_id) for r in batch]
    except (KeyError, TypeError, ValueError) as error:
        raise UnreadableSnapshot(snapshot.pk, str(error)) from None
    ids = [m.pk for m in memories]
    foreign = _first_foreign(Memory, ids, owner_id)
    if foreign is not None:
        raise SnapshotRecordTaken(snapshot.pk, "memory", foreign)
    mine = Memory.objects.filter(owner_id=owner_id).order_by("pk").select_for_update()
    present = mine.in_bulk(ids)
    existing = [m for m in memories if m.pk in present]
    missing = [m for m in memories if m.pk not in present]
    if safety is not None:
        keep_values(safety, memories=present.values())
        keep_created(safety, memories=[m.pk for m in missing])
    update_rows(existing, RESTORED_FIELDS)
    Memory.objects.bulk_create(missing, batch_size=WRITE_BATCH)
    record_revisions(
        [(m, present[m.pk].tracked_state()) for m in existing],
        source=ChangeSource.ADMIN,
        action="restore snapshot",
        now=now,
    )
    reindex_in_batches(memories)
    _forget_normalised(owner_id)
    undone.restored += len(existing)
    undone.recreated += len(missing)


def _put_back_closings(
    snapshot: Snapshot, batch: list[SnapshotRecord], *, safety: Snapshot | None, undone: Undone
) -> None:
    owner_id = snapshot.owner_id
    try:
        closings = [closing_from_value(_value(r), owner_id=owner_id) for r in batch]
    except (KeyError, TypeError, ValueError) as error:
        raise UnreadableSnapshot(snapshot.pk, str(error)) from None
    ids = [c.pk for c in closings]
    foreign = _first_foreign(Closing, ids, owner_id)
    if foreign is not None:
        raise SnapshotRecordTaken(snapshot.pk, "closing", foreign)
    present = Closing.objects.filter(owner_id=owner_id).in_bulk(ids)
    if safety is not None:
        keep_values(safety, closings=present.values())
        keep_created(safety, closings=[c.pk for c in closings if c.pk not in present])
    update_rows(
        [c for c in closings if c.pk in present],
        ["reflection", "conversation_title", "conversation_url", "created_at"],
    )
    Closing.objects.bulk_create([c for c in closings if c.pk not in present])
    undone.closings_restored += len(closings)


def _forget_normalised(owner_id: int) -> None:
    """Records were written back as they once were, drift included: the next import looks
    for it again (memories.services.normalise)."""
    RecallIndex.objects.filter(owner_id=owner_id).update(normalised=False)


def _value(row: SnapshotRecord) -> dict[str, Any]:
    if not isinstance(row.value, dict):
        raise ValueError(f"its {row.kind} {row.record_id} has no value")
    return row.value


def _find_snapshot(snapshot_id: Any, owner: User | None) -> Snapshot:
    try:
        pk = int(snapshot_id)
    except (TypeError, ValueError):
        raise InvalidInput(f"A snapshot id is a number (got {shown(snapshot_id)}).") from None
    queryset = Snapshot.objects.all()
    if owner is not None:
        queryset = queryset.filter(owner=owner)
    snapshot = queryset.filter(pk=pk).first()
    if snapshot is None:
        raise UnknownSnapshot(pk)
    return snapshot


def _parse_records(snapshot: Snapshot) -> tuple[bool, list[Memory], list[Closing]]:
    records = snapshot.records
    try:
        if not isinstance(records, dict):
            raise ValueError("its records are not a snapshot document")
        memories = [
            memory_from_value(value, owner_id=snapshot.owner_id) for value in records["memories"]
        ]
        closings = [
            closing_from_value(value, owner_id=snapshot.owner_id)
            for value in records.get("closings") or []
        ]
    except (KeyError, TypeError, ValueError) as error:
        raise UnreadableSnapshot(snapshot.pk, str(error)) from None
    return bool(records.get("whole_store")), memories, closings


def _timestamp(value: Any) -> datetime | None:
    return parse_timestamp(value) if value is not None else None


def memory_from_value(value: dict[str, Any], *, owner_id: int) -> Memory:
    """A memory exactly as a snapshot holds it (unsaved), with its bookkeeping columns."""
    fields = {name: value[name] for name in RECORD_FIELDS}
    for name in _TIMESTAMPS:
        fields[name] = _timestamp(value[name])
    memory = Memory(id=uuid.UUID(value["id"]), owner_id=owner_id, **fields)
    memory.last_touched_at = last_touch_of(memory.updated_at, memory.last_retrieved)
    refresh_hashes(memory)
    return memory


def closing_from_value(value: dict[str, Any], *, owner_id: int) -> Closing:
    return Closing(
        id=uuid.UUID(value["id"]),
        owner_id=owner_id,
        reflection=value["reflection"],
        conversation_title=value["conversation_title"],
        conversation_url=value["conversation_url"],
        created_at=parse_timestamp(value["created_at"]),
    )


def _first_foreign(
    model: type[Memory] | type[Closing], ids: list[uuid.UUID], owner_id: int
) -> uuid.UUID | None:
    """The first of these ids that belongs to another user, if any."""
    for start in range(0, len(ids), WRITE_BATCH):
        chunk = ids[start : start + WRITE_BATCH]
        foreign = (
            model.objects.filter(pk__in=chunk)
            .exclude(owner_id=owner_id)
            .values_list("pk", flat=True)
            .first()
        )
        if foreign is not None:
            return foreign
    return None


def _remove_memories_not_in(owner_id: int, keep: set[uuid.UUID]) -> int:
    doomed = [
        pk
        for pk in Memory.objects.filter(owner_id=owner_id).values_list("pk", flat=True)
        if pk not in keep
    ]
    for start in range(0, len(doomed), WRITE_BATCH):
        unindex(doomed[start : start + WRITE_BATCH])
        Memory.objects.filter(pk__in=doomed[start : start + WRITE_BATCH]).delete()
    return len(doomed)


def _restore_closings(snapshot: Snapshot, closings: list[Closing]) -> tuple[int, int]:
    """Put the snapshot's closings back and remove the owner's others (whole store only)."""
    owner_id = snapshot.owner_id
    ids = {c.pk for c in closings}
    foreign = _first_foreign(Closing, list(ids), owner_id)
    if foreign is not None:
        raise SnapshotRecordTaken(snapshot.pk, "closing", foreign)
    present = set(Closing.objects.filter(owner_id=owner_id).values_list("pk", flat=True))
    doomed = [pk for pk in present if pk not in ids]
    for start in range(0, len(doomed), WRITE_BATCH):
        Closing.objects.filter(pk__in=doomed[start : start + WRITE_BATCH]).delete()
    update_rows(
        [c for c in closings if c.pk in present],
        ["reflection", "conversation_title", "conversation_url", "created_at"],
    )
    Closing.objects.bulk_create([c for c in closings if c.pk not in present])
    return len(closings), len(doomed)
