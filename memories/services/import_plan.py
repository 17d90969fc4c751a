"""An import's first read (memories.services.importing): every record checked against the
limits every memory keeps, and what the second read will write, per category, planned
without writing anything. Also what both reads share: the records as rows, the original
Taproot's reserved tags turned into state, the ids a record is stored under, and what an
import reports (`Imported`)."""

import copy
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from memories.bulkwrite import WRITE_BATCH
from memories.models import Closing, Memory
from memories.portability.importers import BadFile, Source
from memories.portability.importers.base import is_name_based, own_id
from memories.services.import_records import closing_from, memory_from
from memories.services.normalise import normalise, normalise_list
from memories.vocabulary import home_category

# Reserved tags of the original Taproot.
ARCHIVE_PENDING = "_archive_pending"
COMPRESS_PENDING = "_compress_pending"
ORIGINAL_ARCHIVE_REASON = "archived in the original"
# Records over the limits named in a refusal; the rest are counted.
MAX_NAMED = 20
# Records in one file: ten times the largest store the benchmarks measure. What an import
# keeps between its two reads (each record's id) stays tens of megabytes.
MAX_RECORDS = 1_000_000
Progress = Callable[[str, int], None]
# Made from the text when a record is normalised; not a repair of what the file held.
_HASHES = frozenset({"gist_hash", "content_hash"})


@dataclass(frozen=True)
class Imported:
    """What an import did (or, with dry_run, would do). `snapshot_id` is the whole-store
    snapshot taken before it, or None when nothing was new (then nothing changed and no
    snapshot was written) and on a dry run."""

    memories: int
    memories_skipped: int  # already in the store (or repeated in the file)
    reminted: int  # records given a new id, because another user holds theirs
    closings: int
    closings_skipped: int
    normalised: int  # imported records normalised on the way in
    normalised_existing: int  # records already in the store normalised alongside
    ignored_keys: int  # envelope entries that are neither memories nor closings
    snapshot_id: int | None
    source: str = "taproot"  # which reader read it (memories.portability.importers.SOURCES)
    dry_run: bool = False
    # New and skipped memories per category (as they will be stored), sorted by category.
    created_by_category: dict[str, int] = field(default_factory=dict)
    skipped_by_category: dict[str, int] = field(default_factory=dict)
    # What the store holds that is not imported, and why: reason -> count.
    left_out: dict[str, int] = field(default_factory=dict)
    repeated: int = 0  # records the store holds twice, imported once

    @property
    def message(self) -> str:
        """What happened, in a sentence for the operator's tools."""
        skipped = self.memories_skipped + self.closings_skipped
        if self.dry_run:
            return (
                f"Dry run: {self.memories} {'memory' if self.memories == 1 else 'memories'} "
                f"and {self.closings} {'closing' if self.closings == 1 else 'closings'} "
                f"would be imported, {skipped} skipped. Nothing was changed."
            )
        if not self.memories and not self.closings:
            return (
                f"Nothing new: all {skipped} records are already in your store, so nothing "
                "changed and no snapshot was written."
            )
        text = (
            f"Imported {self.memories} {'memory' if self.memories == 1 else 'memories'} and "
            f"{self.closings} {'closing' if self.closings == 1 else 'closings'}"
        )
        if skipped:
            text += f"; {skipped} already present were skipped"
        return text + ". The store as it was before is kept in a snapshot."


@dataclass(frozen=True)
class Options:
    owner_id: int
    now: datetime
    category: str | None  # for records whose store gives none
    allow_over_limits: bool
    progress: Progress | None

    def advance(self, stage: str, count: int) -> None:
        if self.progress is not None and count:
            self.progress(stage, count)


@dataclass
class Written:
    """What the second read wrote, per category: less than the plan when another import
    into the account wrote some of the records between the two reads."""

    memories: Counter[str] = field(default_factory=Counter)
    closings: int = 0


@dataclass
class Plan:
    """What the first read found: enough to write the second time, never the records."""

    memory_ids: set[int] = field(default_factory=set)
    closing_ids: set[int] = field(default_factory=set)
    repeats: set[int] = field(default_factory=set)  # positions of records seen before
    # File id -> the id it is stored under: a new one when another user holds the file's,
    # or the copy an earlier import made.
    new_ids: dict[uuid.UUID, uuid.UUID] = field(default_factory=dict)
    copies: set[uuid.UUID] = field(default_factory=set)
    created: Counter[str] = field(default_factory=Counter)
    skipped: Counter[str] = field(default_factory=Counter)
    closings: int = 0
    closings_skipped: int = 0
    reminted: int = 0
    normalised: int = 0
    problems: list[str] = field(default_factory=list)
    problem_count: int = 0

    def settle(self, written: Written) -> None:
        """Count as skipped what the plan meant to write and the second read found present."""
        for category, planned in self.created.items():
            self.skipped[category] += planned - written.memories[category]
        self.created = +written.memories
        self.closings_skipped += self.closings - written.closings
        self.closings = written.closings

    def summary(
        self, reader: Source, *, dry_run: bool, normalised_existing: int = 0, **done: Any
    ) -> Imported:
        left_out = dict(sorted(reader.left_out.items()))
        return Imported(
            memories=sum(self.created.values()),
            memories_skipped=sum(self.skipped.values()) + len(self.repeats),
            reminted=self.reminted,
            closings=self.closings,
            closings_skipped=self.closings_skipped,
            normalised=self.normalised,
            normalised_existing=normalised_existing,
            ignored_keys=left_out.get("other keys", 0),
            snapshot_id=done.get("snapshot_id"),
            source=reader.name,
            dry_run=dry_run,
            created_by_category=dict(sorted(self.created.items())),
            skipped_by_category=dict(sorted(self.skipped.items())),
            left_out=left_out,
            repeated=len(self.repeats),
        )


@dataclass
class Record:
    position: int
    label: str
    row: Memory | Closing
    over: list[str]  # how it breaks the limits


def plan_import(reader: Source, options: Options) -> Plan:
    plan = Plan()
    batch: list[Record] = []
    for record in read_records(reader, options):
        ids = plan.memory_ids if isinstance(record.row, Memory) else plan.closing_ids
        key = record.row.pk.int
        if key in ids:
            if reader.repeats_refused:
                kind = "memory" if isinstance(record.row, Memory) else "closing"
                raise BadFile(f"the {kind} id {record.row.pk} appears more than once")
            plan.repeats.add(record.position)
            continue
        ids.add(key)
        if len(plan.memory_ids) + len(plan.closing_ids) > MAX_RECORDS:
            raise BadFile(f"it holds more than {MAX_RECORDS:,} records; split it")
        batch.append(record)
        if len(batch) == WRITE_BATCH:
            _plan_batch(plan, batch, options)
            batch = []
    _plan_batch(plan, batch, options)
    if plan.problems:
        more = plan.problem_count - len(plan.problems)
        raise BadFile(
            f"{plan.problem_count:,} "
            + ("record breaks" if plan.problem_count == 1 else "records break")
            + " the limits every memory keeps: "
            + "; ".join(plan.problems)
            + (f"; and {more:,} more" if more else "")
        )
    return plan


def read_records(reader: Source, options: Options) -> Iterator[Record]:
    for position, entry in enumerate(reader.entries()):
        if entry.kind == "memory":
            memory, over = memory_from(
                entry, owner_id=options.owner_id, now=options.now, category=options.category
            )
            yield Record(position, entry.label, memory, over)
        else:
            closing, over = closing_from(entry, owner_id=options.owner_id, now=options.now)
            yield Record(position, entry.label, closing, over)


def _plan_batch(plan: Plan, batch: list[Record], options: Options) -> None:
    if not batch:
        return
    options.advance("checking", len(batch))
    mine = options.owner_id
    memories = [r for r in batch if isinstance(r.row, Memory)]
    closings = [r for r in batch if isinstance(r.row, Closing)]
    memory_owners = owners_of(Memory, ids_to_look_up([r.row.pk for r in memories], mine))
    closing_owners = owners_of(Closing, ids_to_look_up([r.row.pk for r in closings], mine))
    foreign = [
        r.row
        for r in memories
        if not is_name_based(r.row.pk) and memory_owners.get(r.row.pk, mine) != mine
    ]
    copies = _earlier_copies(Memory, foreign, options.owner_id, "content")
    foreign_closings = [
        r.row
        for r in closings
        if not is_name_based(r.row.pk) and closing_owners.get(r.row.pk, mine) != mine
    ]
    closing_copies = _earlier_copies(Closing, foreign_closings, options.owner_id, "reflection")
    for record in memories:
        memory = record.row
        assert isinstance(memory, Memory)
        category = home_category(memory.category)
        if memory_owners.get(memory.pk) == mine:
            plan.skipped[category] += 1
            continue
        stored = copies.get(memory.pk) or stored_id(memory.pk, memory_owners, mine)
        if stored is not None:
            plan.new_ids[memory.pk] = stored
            if memory_owners.get(stored) == mine or memory.pk in copies:
                plan.skipped[category] += 1
                plan.copies.add(memory.pk)
                continue
            plan.reminted += 1
        _note_problems(plan, record, options)
        plan.created[category] += 1
        if plan.problems:
            continue  # refused anyway: no need to know what normalising would change
        draft = copy.deepcopy(memory)
        if apply_original_quirks(draft) | bool(set(normalise(draft)) - _HASHES):
            plan.normalised += 1
    for record in closings:
        pk = record.row.pk
        if closing_owners.get(pk) == mine or pk in closing_copies:
            plan.closings_skipped += 1
            if pk in closing_copies:
                plan.copies.add(pk)
            continue
        stored = stored_id(pk, closing_owners, mine)
        if stored is not None:
            if closing_owners.get(stored) == mine:
                plan.closings_skipped += 1
                plan.copies.add(pk)
                continue
            plan.reminted += 1
        _note_problems(plan, record, options)
        plan.closings += 1


def ids_to_look_up(ids: list[uuid.UUID], owner_id: int) -> list[uuid.UUID]:
    """The records' ids, and the ids their name-based ones are stored under."""
    return [*ids, *(own_id(owner_id, i) for i in ids if is_name_based(i))]


def stored_id(
    record_id: uuid.UUID, owners: dict[uuid.UUID, int], owner_id: int
) -> uuid.UUID | None:
    """The id a record the owner does not hold under its file's id is stored under, when
    it cannot be that one; None when it can.

    A name-based id (a peer store's, or another system's) is never stored as it is, but
    under `own_id`, whether or not another account holds it: anyone can compute such an
    id for another account's memory, and had the import kept it when free and replaced it
    when taken, which ids came back replaced would have told them what that account holds.
    Any other id is kept unless another account holds it (then a random one): such ids
    are random, and no one can guess another account's.
    """
    if is_name_based(record_id):
        return own_id(owner_id, record_id)
    if record_id in owners:
        return uuid.uuid4()
    return None


def _note_problems(plan: Plan, record: Record, options: Options) -> None:
    if not record.over or options.allow_over_limits:
        return
    plan.problem_count += 1
    if len(plan.problems) < MAX_NAMED:
        plan.problems.append(f"{record.label} ({', '.join(record.over)})")


def apply_original_quirks(memory: Memory) -> bool:
    """Turn the original's reserved tags into state; True when one was found."""
    tags = normalise_list(memory.tags)
    folded = [tag.strip().lower() for tag in tags]
    if ARCHIVE_PENDING not in folded and COMPRESS_PENDING not in folded:
        return False
    if ARCHIVE_PENDING in folded and memory.archived_at is None:
        memory.archived_at = memory.updated_at
        memory.archive_reason = memory.archive_reason or ORIGINAL_ARCHIVE_REASON
    memory.tags = [
        tag
        for tag, key in zip(tags, folded, strict=True)
        if key not in (ARCHIVE_PENDING, COMPRESS_PENDING)
    ]
    return True


def owners_of(model: type[Memory] | type[Closing], ids: list[uuid.UUID]) -> dict[uuid.UUID, int]:
    owners: dict[uuid.UUID, int] = {}
    for start in range(0, len(ids), WRITE_BATCH):
        chunk = ids[start : start + WRITE_BATCH]
        owners.update(model.objects.filter(pk__in=chunk).values_list("pk", "owner_id"))
    return owners


def _earlier_copies(
    model: type[Memory] | type[Closing],
    records: list[Any],
    owner_id: int,
    text: str,
) -> dict[uuid.UUID, uuid.UUID]:
    """Records whose id another user holds, that an earlier import already copied to
    this owner under a new id (same text, same created_at): file id -> the copy's id."""
    if not records:
        return {}
    wanted = {(getattr(r, text), r.created_at): r.pk for r in records}
    copies: dict[uuid.UUID, uuid.UUID] = {}
    moments = sorted({r.created_at for r in records})
    for start in range(0, len(moments), WRITE_BATCH):
        rows = model.objects.filter(
            owner_id=owner_id, created_at__in=moments[start : start + WRITE_BATCH]
        ).values_list("pk", text, "created_at")
        for pk, value, created_at in rows:
            if (value, created_at) in wanted:
                copies[wanted[(value, created_at)]] = pk
    return copies
