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

import uuid
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
from memories.services.import_plan import (
    Imported,
    Options,
    Plan,
    Progress,
    Record,
    Written,
    apply_original_quirks,
    ids_to_look_up,
    owners_of,
    plan_import,
    read_records,
    stored_id,
)
from memories.services.import_records import canonical_id
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
    normalise_stored,
)
from memories.services.snapshots import keep_created, prune_snapshots
from memories.services.unit_of_work import embed_ahead
from memories.vocabulary import home_category

__all__ = ["BadFile", "Imported", "import_store"]

# New memories whose vectors are embedded before the write transaction (as every other
# write does, so SQLite's write lock is not held while a model embeds). A larger import
# embeds each batch as it writes it, so its vectors are never all held at once.
EMBED_AHEAD_MAX = 2_000


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
    options = Options(
        owner.pk,
        now,
        category.value if category is not None else reader.default_category,
        allow_over_limits,
        progress,
    )
    plan = plan_import(reader, options)
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
        return _import(reader, plan_import(reader, options), options)
    except IntegrityError:
        raise InvalidInput(
            "The file was not imported: another import was writing records with the same "
            "ids at the same moment. Nothing was changed; import it again."
        ) from None


# Writing: the second read --------------------------------------------------------------


def _remap_links(links: list[str], new_ids: dict[uuid.UUID, uuid.UUID]) -> list[str]:
    remapped = []
    for link in links:
        target = canonical_id(link)
        remapped.append(str(new_ids[target]) if target in new_ids else link)
    return remapped


def _import(reader: Source, plan: Plan, options: Options) -> Imported:
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
        written = Written()
        batch: list[Record] = []
        for record in read_records(reader, options):
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
    batch: list[Record],
    plan: Plan,
    options: Options,
    ahead: Vectors | None,
    written: Written,
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
    batch: list[Record], plan: Plan, options: Options
) -> tuple[list[Memory], list[Closing]]:
    """The records of the batch to write, with the ids they are stored under."""
    mine = options.owner_id
    memories = [r.row for r in batch if isinstance(r.row, Memory)]
    closings = [r.row for r in batch if isinstance(r.row, Closing)]
    memory_owners = owners_of(Memory, ids_to_look_up([m.pk for m in memories], mine))
    closing_owners = owners_of(Closing, ids_to_look_up([c.pk for c in closings], mine))

    def held(row: Memory | Closing, owners: dict[uuid.UUID, int]) -> bool:
        return owners.get(row.pk) == mine or (
            is_name_based(row.pk) and owners.get(own_id(mine, row.pk)) == mine
        )

    new_memories = [m for m in memories if not held(m, memory_owners) and m.pk not in plan.copies]
    new_closings = [c for c in closings if not held(c, closing_owners) and c.pk not in plan.copies]
    for closing in new_closings:
        stored = stored_id(closing.pk, closing_owners, mine)
        if stored is not None:
            closing.id = stored
    for memory in new_memories:
        if memory.pk not in plan.new_ids and (stored := stored_id(memory.pk, memory_owners, mine)):
            # Taken by another account's import since the first read.
            plan.new_ids[memory.pk] = stored
            plan.reminted += 1
    return new_memories, new_closings


def _write_batch(
    batch: list[Record],
    plan: Plan,
    options: Options,
    ahead: Vectors | None,
    written: Written,
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


def _embed_ahead(reader: Source, plan: Plan, options: Options) -> Vectors | None:
    """The vectors of the new memories as they will be stored (quirks applied and
    normalised, on copies), embedded before the write transaction; None for an import
    of more than EMBED_AHEAD_MAX memories, whose batches embed as they are written."""
    if embedder() is None or len(plan.memory_ids) > EMBED_AHEAD_MAX:
        return None
    drafts = []
    for record in read_records(reader, options):
        if isinstance(record.row, Memory) and record.position not in plan.repeats:
            draft = record.row
            apply_original_quirks(draft)
            normalise(draft)
            drafts.append(draft)
    return embed_ahead(drafts)
