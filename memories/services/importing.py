"""Import a store (SPEC §7, extended by the switching issue): Taproot's own export, an
original Taproot (Cloudflare KV) backup or a bare JSON array of memory records, and the
stores of other memory servers that memories.portability.importers reads.

The store is read twice, a record at a time, so what an import holds does not grow with
the file. The first read checks everything and writes nothing: every record readable,
within the limits the tools apply (memories.limits), and what would be created or
skipped, per category (a dry run stops here). One bad record refuses the whole file and
changes nothing; a file whose records break the limits is refused naming up to
MAX_NAMED of them. The second read writes: the normalisation of the records already
there, then the new records (normalised by the same function migrate uses) in batches,
each committed on its own with the ids it created added to the import's snapshot, which
undoes the import should it fail or its process die (memories.services.import_runs). One
import or dry run per account runs at a time.

Records the account already holds are skipped before the limits are checked, so an
export of a store that older imports filled beyond the limits imports back into it
(changing nothing); `allow_over_limits` (the command's --allow-over-limits) takes such
records into another account or server.
"""

import copy
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import IntegrityError, transaction

from memories.bulkwrite import WRITE_BATCH
from memories.conf import embedder
from memories.errors import InvalidInput
from memories.maintenance import refresh_planner_statistics
from memories.models import Category, ChangeSource, Closing, Memory, Snapshot, User
from memories.portability.importers import BadFile, Source, open_source
from memories.portability.importers.base import is_name_based, own_id
from memories.recall.indexing import Vectors
from memories.services._common import now_or, record_revisions, reindex_in_batches
from memories.services.import_records import canonical_id, closing_from, memory_from
from memories.services.import_runs import (
    abandon_import,
    begin_import,
    finish_import,
    heartbeat,
    import_slot,
)
from memories.services.normalise import (
    normalise,
    normalise_if_drifted,
    normalise_list,
    normalise_stored,
)
from memories.services.snapshots import keep_created, prune_snapshots
from memories.services.unit_of_work import embed_ahead
from memories.vocabulary import home_category

__all__ = ["BadFile", "Imported", "import_store"]

# Reserved tags of the original Taproot.
ARCHIVE_PENDING = "_archive_pending"
COMPRESS_PENDING = "_compress_pending"
ORIGINAL_ARCHIVE_REASON = "archived in the original"
# Records over the limits named in a refusal; the rest are counted.
MAX_NAMED = 20
# Records in one file: ten times the largest store the benchmarks measure. What an import
# keeps between its two reads (each record's id) stays tens of megabytes.
MAX_RECORDS = 1_000_000
# New memories whose vectors are embedded before the write transaction (as every other
# write does, so SQLite's write lock is not held while a model embeds). A larger import
# embeds each batch as it writes it, so its vectors are never all held at once.
EMBED_AHEAD_MAX = 2_000

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


def import_store(
    *,
    owner: User,
    # Any: a file's bytes (or text), a folder, or parsed JSON, which may hold anything;
    # the readers check every part of it and refuse what does not fit, naming where.
    data: Any,
    source: str | None = None,
    category: Category | None = None,
    dry_run: bool = False,
    allow_over_limits: bool = False,
    now: datetime | None = None,
    progress: Progress | None = None,
) -> Imported:
    """Import `data` into owner's store. `source` forces a reader (one of
    memories.portability.importers.SOURCES; by default the content says which); `category` is the
    category of records whose store has none; `dry_run` checks and counts, and writes
    nothing; `progress(stage, records)` hears of each batch read ("checking") and written
    ("importing")."""
    with import_slot(owner.pk):
        return _import_store(
            owner=owner,
            data=data,
            source=source,
            category=category,
            dry_run=dry_run,
            allow_over_limits=allow_over_limits,
            now=now_or(now),
            progress=progress,
        )


def _import_store(
    *,
    owner: User,
    data: Any,
    source: str | None,
    category: Category | None,
    dry_run: bool,
    allow_over_limits: bool,
    now: datetime,
    progress: Progress | None,
) -> Imported:
    reader = open_source(data, source=source, owner_id=owner.pk)
    options = _Options(
        owner.pk,
        now,
        category.value if category is not None else reader.default_category,
        allow_over_limits,
        progress,
    )
    plan = _check(reader, options)
    if dry_run:
        return plan.summary(
            reader,
            dry_run=True,
            normalised_existing=normalise_stored(
                owner.pk, source=ChangeSource.IMPORT, now=now, dry_run=True
            ).migrated,
        )
    try:
        return _import(reader, plan, options)
    except IntegrityError:
        pass
    # An import into another account wrote some of the same ids after this one looked.
    # Once more from the start, now that they are there: those records get new ids.
    try:
        return _import(reader, _check(reader, options), options)
    except IntegrityError:
        raise InvalidInput(
            "The file was not imported: another import was writing records with the same "
            "ids at the same moment. Nothing was changed; import it again."
        ) from None


@dataclass(frozen=True)
class _Options:
    owner_id: int
    now: datetime
    category: str | None  # for records whose store gives none
    allow_over_limits: bool
    progress: Progress | None

    def advance(self, stage: str, count: int) -> None:
        if self.progress is not None and count:
            self.progress(stage, count)


# The first read: checking, and planning what the second one writes --------------------


@dataclass
class _Written:
    """What the second read wrote, per category: less than the plan when another import
    into the account wrote some of the records between the two reads."""

    memories: Counter[str] = field(default_factory=Counter)
    closings: int = 0


@dataclass
class _Plan:
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

    def settle(self, written: _Written) -> None:
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
class _Record:
    position: int
    label: str
    row: Memory | Closing
    over: list[str]  # how it breaks the limits


def _check(reader: Source, options: _Options) -> _Plan:
    plan = _Plan()
    batch: list[_Record] = []
    for record in _records(reader, options):
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


def _records(reader: Source, options: _Options) -> Iterator[_Record]:
    for position, entry in enumerate(reader.entries()):
        if entry.kind == "memory":
            memory, over = memory_from(
                entry, owner_id=options.owner_id, now=options.now, category=options.category
            )
            yield _Record(position, entry.label, memory, over)
        else:
            closing, over = closing_from(entry, owner_id=options.owner_id, now=options.now)
            yield _Record(position, entry.label, closing, over)


def _plan_batch(plan: _Plan, batch: list[_Record], options: _Options) -> None:
    if not batch:
        return
    options.advance("checking", len(batch))
    mine = options.owner_id
    memories = [r for r in batch if isinstance(r.row, Memory)]
    closings = [r for r in batch if isinstance(r.row, Closing)]
    memory_owners = _owners_of(Memory, _ids_to_look_up([r.row.pk for r in memories], mine))
    closing_owners = _owners_of(Closing, _ids_to_look_up([r.row.pk for r in closings], mine))
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
        stored = copies.get(memory.pk) or _stored_id(memory.pk, memory_owners, mine)
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
        stored = _stored_id(pk, closing_owners, mine)
        if stored is not None:
            if closing_owners.get(stored) == mine:
                plan.closings_skipped += 1
                plan.copies.add(pk)
                continue
            plan.reminted += 1
        _note_problems(plan, record, options)
        plan.closings += 1


def _ids_to_look_up(ids: list[uuid.UUID], owner_id: int) -> list[uuid.UUID]:
    """The records' ids, and the ids their name-based ones are stored under."""
    return [*ids, *(own_id(owner_id, i) for i in ids if is_name_based(i))]


def _stored_id(
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


def _note_problems(plan: _Plan, record: _Record, options: _Options) -> None:
    if not record.over or options.allow_over_limits:
        return
    plan.problem_count += 1
    if len(plan.problems) < MAX_NAMED:
        plan.problems.append(f"{record.label} ({', '.join(record.over)})")


# Writing: the second read --------------------------------------------------------------


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


def _owners_of(model: type[Memory] | type[Closing], ids: list[uuid.UUID]) -> dict[uuid.UUID, int]:
    owners: dict[uuid.UUID, int] = {}
    for start in range(0, len(ids), WRITE_BATCH):
        chunk = ids[start : start + WRITE_BATCH]
        owners.update(model.objects.filter(pk__in=chunk).values_list("pk", "owner_id"))
    return owners


def _remap_links(links: list[str], new_ids: dict[uuid.UUID, uuid.UUID]) -> list[str]:
    remapped = []
    for link in links:
        target = canonical_id(link)
        remapped.append(str(new_ids[target]) if target in new_ids else link)
    return remapped


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


def _import(reader: Source, plan: _Plan, options: _Options) -> Imported:
    if not plan.created and not plan.closings:
        return plan.summary(reader, dry_run=False)
    ahead = _embed_ahead(reader, plan, options)
    # In committed batches, so that other accounts' writes go through between them (on
    # SQLite, which has one write lock). The account sees it whole or not at all: the
    # snapshot, in progress until the last batch, lists what each batch created, and an
    # import that fails here, or whose process dies, is undone from it
    # (memories.services.import_runs).
    run = begin_import(options.owner_id, options.now)
    try:
        normalised_existing = normalise_if_drifted(
            options.owner_id, source=ChangeSource.IMPORT, now=options.now, keep_in=run
        )
        written = _Written()
        batch: list[_Record] = []
        for record in _records(reader, options):
            if record.position in plan.repeats:
                continue
            batch.append(record)
            if len(batch) == WRITE_BATCH:
                _commit_batch(batch, plan, options, ahead, written, run)
                batch = []
        _commit_batch(batch, plan, options, ahead, written, run)
        plan.settle(written)
        if not plan.created and not plan.closings:
            # Another import of these records got the account first: as when the first
            # read finds nothing new, nothing changes and no snapshot is kept.
            abandon_import(run, options.now)
            return plan.summary(reader, dry_run=False)
        finish_import(run)
    except BaseException:
        abandon_import(run, options.now)
        raise
    prune_snapshots(options.owner_id)
    # A whole store arrives at once: let the planner see it before autovacuum would.
    refresh_planner_statistics()
    return plan.summary(
        reader, dry_run=False, normalised_existing=normalised_existing, snapshot_id=run.pk
    )


def _commit_batch(
    batch: list[_Record],
    plan: _Plan,
    options: _Options,
    ahead: Vectors | None,
    written: _Written,
    run: Snapshot,
) -> None:
    """One batch written and committed, with the ids it created kept in the import's
    snapshot in the same transaction."""
    if not batch:
        return
    with transaction.atomic():
        memories, closings = _write_batch(batch, plan, options, ahead, written)
        keep_created(run, memories=[m.pk for m in memories], closings=[c.pk for c in closings])
        heartbeat(run)


def _new_in(
    batch: list[_Record], plan: _Plan, options: _Options
) -> tuple[list[Memory], list[Closing]]:
    """The records of the batch to write, with the ids they are stored under."""
    mine = options.owner_id
    memories = [r.row for r in batch if isinstance(r.row, Memory)]
    closings = [r.row for r in batch if isinstance(r.row, Closing)]
    memory_owners = _owners_of(Memory, _ids_to_look_up([m.pk for m in memories], mine))
    closing_owners = _owners_of(Closing, _ids_to_look_up([c.pk for c in closings], mine))

    def held(row: Memory | Closing, owners: dict[uuid.UUID, int]) -> bool:
        return owners.get(row.pk) == mine or (
            is_name_based(row.pk) and owners.get(own_id(mine, row.pk)) == mine
        )

    new_memories = [m for m in memories if not held(m, memory_owners) and m.pk not in plan.copies]
    new_closings = [c for c in closings if not held(c, closing_owners) and c.pk not in plan.copies]
    for closing in new_closings:
        stored = _stored_id(closing.pk, closing_owners, mine)
        if stored is not None:
            closing.id = stored
    for memory in new_memories:
        if memory.pk not in plan.new_ids and (stored := _stored_id(memory.pk, memory_owners, mine)):
            # Taken by another account's import since the first read.
            plan.new_ids[memory.pk] = stored
            plan.reminted += 1
    return new_memories, new_closings


def _write_batch(
    batch: list[_Record],
    plan: _Plan,
    options: _Options,
    ahead: Vectors | None,
    written: _Written,
) -> tuple[list[Memory], list[Closing]]:
    new_memories, new_closings = _new_in(batch, plan, options)
    written.memories.update(home_category(m.category) for m in new_memories)
    written.closings += len(new_closings)
    revised = []
    for memory in new_memories:
        before = memory.tracked_state()
        apply_original_quirks(memory)
        normalise(memory)
        memory.linked_memories = _remap_links(memory.linked_memories, plan.new_ids)
        memory.id = plan.new_ids.get(memory.pk, memory.pk)
        revised.append((memory, before))
    Memory.objects.bulk_create(new_memories, batch_size=WRITE_BATCH)
    Closing.objects.bulk_create(new_closings, batch_size=WRITE_BATCH)
    record_revisions(revised, source=ChangeSource.IMPORT, action="import", now=options.now)
    reindex_in_batches(new_memories, new=True, vectors=ahead)
    options.advance("importing", len(batch))
    return new_memories, new_closings


def _embed_ahead(reader: Source, plan: _Plan, options: _Options) -> Vectors | None:
    """The vectors of the new memories as they will be stored (quirks applied and
    normalised, on copies), embedded before the write transaction; None for an import
    of more than EMBED_AHEAD_MAX memories, whose batches embed as they are written."""
    if embedder() is None or len(plan.memory_ids) > EMBED_AHEAD_MAX:
        return None
    drafts = []
    for record in _records(reader, options):
        if isinstance(record.row, Memory) and record.position not in plan.repeats:
            draft = record.row
            apply_original_quirks(draft)
            normalise(draft)
            drafts.append(draft)
    return embed_ahead(drafts)
