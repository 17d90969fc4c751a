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

Putting a snapshot back is memories.services.snapshot_restore.

Every restore first takes a snapshot of the present ("before-restore"), so a restore can
itself be undone by restoring that one.

Snapshots taken since imports write in batches keep their records in rows
(SnapshotRecord), written and read a batch at a time, so their cost does not grow with
the store: an import's ("before-import") holds the memories it normalised as they were
and the ids of the records it created; restoring it puts the first back and removes the
second, leaving everything else alone. Its "before-restore" holds what that restore
changes. An account keeps its newest KEEP_SNAPSHOTS snapshots.
"""

import uuid
from collections.abc import Iterable, Iterator
from datetime import datetime
from typing import Any

from django.db.models import Count, F

from memories.bulkwrite import WRITE_BATCH
from memories.models import (
    Closing,
    Memory,
    Snapshot,
    SnapshotRecord,
)
from memories.portability.exporting import memory_value

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
