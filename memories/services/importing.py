"""Import a store (SPEC §7, extended by the switching issue): Taproot's own export, an
original Taproot (Cloudflare KV) backup or a bare JSON array of memory records, and the
stores of other memory servers that memories.importers reads.

The store is read twice, a record at a time, so what an import holds does not grow with
the file. The first read checks everything and writes nothing: every record readable,
within the limits the tools apply (memories.limits), and what would be created or
skipped, per category (a dry run stops here). One bad record refuses the whole file and
changes nothing; a file whose records break the limits is refused naming up to
MAX_NAMED of them. The second read writes, in one transaction: a snapshot of the whole
store, the new records in batches (normalised by the same function migrate uses), and
the normalisation of the records already there. Imports into one account run one at a
time.

Records the account already holds are skipped before the limits are checked, so an
export of a store that older imports filled beyond the limits imports back into it
(changing nothing); `allow_over_limits` (the command's --allow-over-limits) takes such
records into another account or server.
"""

import copy
import json
import re
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction

from memories.bulkwrite import WRITE_BATCH
from memories.conf import embedder
from memories.errors import InvalidInput
from memories.importers import BadFile, Entry, Source, jsontext, open_source
from memories.importers.jsontext import TOO_DEEP
from memories.indexing import Vectors
from memories.limits import (
    MAX_CONTENT,
    MAX_GIST,
    MAX_ITEM_LENGTH,
    MAX_LINKS,
    MAX_LIST_ITEMS,
    MAX_REASON,
    MAX_REFERENCE,
    MAX_REFLECTION,
    MAX_TITLE,
    unstorable,
)
from memories.maintenance import refresh_planner_statistics
from memories.models import Category, ChangeSource, Closing, Memory, User
from memories.quoting import shown
from memories.services._common import now_or, record_revisions, reindex_in_batches
from memories.services.normalise import LIST_FIELDS, normalise, normalise_list, normalise_stored
from memories.services.snapshots import take_snapshot
from memories.services.unit_of_work import embed_ahead
from memories.timeutil import parse_timestamp
from memories.vocabulary import home_category, last_touch_of

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
# An id as RFC 9562 writes it; either case (it is the same id), stored in lower case.
# Braces, "urn:uuid:" and missing hyphens are refused: no Taproot writes them, and a link
# elsewhere in the file that spells the id another way would silently point nowhere.
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")

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
    source: str = "taproot"  # which reader read it (memories.importers.SOURCES)
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
    memories.importers.SOURCES; by default the content says which); `category` is the
    category of records whose store has none; `dry_run` checks and counts, and writes
    nothing; `progress(stage, records)` hears of each batch read ("checking") and written
    ("importing")."""
    now = now_or(now)
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
            memory, over = _memory(entry, options)
            yield _Record(position, entry.label, memory, over)
        else:
            closing, over = _closing(entry, options)
            yield _Record(position, entry.label, closing, over)


def _plan_batch(plan: _Plan, batch: list[_Record], options: _Options) -> None:
    if not batch:
        return
    options.advance("checking", len(batch))
    memories = [r for r in batch if isinstance(r.row, Memory)]
    closings = [r for r in batch if isinstance(r.row, Closing)]
    memory_owners = _owners_of(Memory, [r.row.pk for r in memories])
    closing_owners = _owners_of(Closing, [r.row.pk for r in closings])
    mine = options.owner_id
    foreign = [r.row for r in memories if memory_owners.get(r.row.pk, mine) != mine]
    copies = _earlier_copies(Memory, foreign, options.owner_id, "content")
    foreign_closings = [r.row for r in closings if closing_owners.get(r.row.pk, mine) != mine]
    closing_copies = _earlier_copies(Closing, foreign_closings, options.owner_id, "reflection")
    for record in memories:
        memory = record.row
        assert isinstance(memory, Memory)
        category = home_category(memory.category)
        if memory_owners.get(memory.pk) == options.owner_id or memory.pk in copies:
            plan.skipped[category] += 1
            if memory.pk in copies:
                plan.new_ids[memory.pk] = copies[memory.pk]
                plan.copies.add(memory.pk)
            continue
        if memory.pk in memory_owners:
            plan.new_ids[memory.pk] = uuid.uuid4()
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
        if closing_owners.get(pk) == options.owner_id or pk in closing_copies:
            plan.closings_skipped += 1
            if pk in closing_copies:
                plan.copies.add(pk)
            continue
        if pk in closing_owners:
            plan.reminted += 1
        _note_problems(plan, record, options)
        plan.closings += 1


def _note_problems(plan: _Plan, record: _Record, options: _Options) -> None:
    if not record.over or options.allow_over_limits:
        return
    plan.problem_count += 1
    if len(plan.problems) < MAX_NAMED:
        plan.problems.append(f"{record.label} ({', '.join(record.over)})")


# Reading one record --------------------------------------------------------------------


def _id(value: dict[str, Any], key_id: str | None, label: str) -> uuid.UUID:
    raw = value.get("id", key_id)
    pk = _canonical(raw)
    if pk is None:
        raise BadFile(
            f"{label} has an id that is not a UUID ({shown(raw)}); ids are written as 32 "
            "hexadecimal digits in groups of 8-4-4-4-12"
        )
    if key_id is not None and "id" in value:
        key = _canonical(key_id)
        if key is not None and key != pk:  # a key without a UUID: the value's id stands
            raise BadFile(f"{label} holds a record whose id {shown(raw)} differs from its key")
    return pk


def _canonical(raw: Any) -> uuid.UUID | None:
    if not isinstance(raw, str) or not _UUID.fullmatch(raw.strip()):
        return None
    return uuid.UUID(raw.strip())


def _timestamp(value: dict[str, Any], name: str, label: str) -> datetime | None:
    raw = value.get(name)
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return None
    if isinstance(raw, str):
        try:
            return parse_timestamp(raw)
        except (ValueError, OverflowError):  # Overflow: a zone pushes it past year 1 or 9999
            pass
    raise BadFile(f"{label} has a {name} that is not an ISO-8601 date-time ({shown(raw)})")


def _text(value: Any) -> str | None:
    if isinstance(value, str) and value.strip():
        return value
    return None


_TRUE = frozenset({"true", "yes", "1"})


def _flag(value: Any) -> bool:
    """A flag as a file may hold it: true, or the text "true", "yes" or "1"; anything else
    is false."""
    if isinstance(value, bool):
        return value
    return isinstance(value, str) and value.strip().lower() in _TRUE


def _provenance(value: Any) -> str | None:
    # The original sometimes kept provenance as an object; keep it, as JSON text.
    if value is None or isinstance(value, str):
        return _text(value)
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _memory(entry: Entry, options: _Options) -> tuple[Memory, list[str]]:
    """An unsaved memory holding the record's values as given (normalised later), and
    how it breaks the limits."""
    value, label = entry.value, entry.label
    pk = _id(value, entry.key_id, label)
    _refuse_unreadable(value, label)
    lists = _list_values(value, label)
    content = value.get("content")
    if not isinstance(content, str) or not content.strip():
        raise BadFile(f"{label} has no content (it must be non-blank text)")
    source = value.get("source")
    if not isinstance(source, dict):
        source = {}
    # Kept as given, drift included: normalise() repairs them before anything is saved.
    as_given: dict[str, Any] = {
        name: value.get(name)
        for name in (
            "category",
            "salience",
            "epistemic_status",
            "replication_count",
            "compression_level",
            "retrieval_count",
        )
    }
    if as_given["category"] is None and options.category is not None:
        as_given["category"] = options.category
    created_at = _timestamp(value, "created_at", label)
    updated_at = _timestamp(value, "updated_at", label) or created_at or options.now
    memory = Memory(
        id=pk,
        owner_id=options.owner_id,
        **as_given,
        content=content,
        gist=gist if isinstance(gist := value.get("gist"), str) else "",
        gist_autogenerated=value.get("gist_autogenerated") is True,
        core=_flag(value.get("core")),
        tags=copy.deepcopy(value.get("tags", [])),
        search_keywords=copy.deepcopy(value.get("search_keywords", [])),
        linked_memories=_canonical_links(copy.deepcopy(value.get("linked_memories", []))),
        conversation_url=_text(value.get("conversation_url"))
        or _text(source.get("conversation_url")),
        conversation_id=_text(value.get("conversation_id")) or _text(source.get("conversation_id")),
        transcript_ref=_text(value.get("transcript_ref")) or _text(source.get("transcript_ref")),
        provenance=_provenance(value.get("provenance")),
        created_at=created_at or updated_at,
        updated_at=updated_at,
        last_retrieved=_timestamp(value, "last_retrieved", label),
        archived_at=_timestamp(value, "archived_at", label),
        archive_reason=_text(value.get("archive_reason")),
    )
    memory.last_touched_at = last_touch_of(memory.updated_at, memory.last_retrieved)
    # Its hashes are made when it is normalised: a record the limits refuse costs no more.
    return memory, _memory_over_limits(memory, lists)


def _closing(entry: Entry, options: _Options) -> tuple[Closing, list[str]]:
    value, label = entry.value, entry.label
    pk = _id(value, entry.key_id, label)
    _refuse_unreadable(value, label)
    reflection = value.get("reflection")
    if not isinstance(reflection, str) or not reflection.strip():
        raise BadFile(f"{label} has no reflection (it must be non-blank text)")
    closing = Closing(
        id=pk,
        owner_id=options.owner_id,
        reflection=reflection.strip(),  # as a closing is stored
        conversation_title=_text(value.get("conversation_title")),
        conversation_url=_text(value.get("conversation_url")),
        created_at=_timestamp(value, "created_at", label) or options.now,
    )
    over = [
        *_too_long("reflection", closing.reflection, MAX_REFLECTION),
        *_too_long("conversation_title", closing.conversation_title, MAX_TITLE),
        *_too_long("conversation_url", closing.conversation_url, MAX_REFERENCE),
    ]
    return closing, over


# The limits ----------------------------------------------------------------------------


def _too_long(name: str, text: str | None, limit: int) -> list[str]:
    if text is None or len(text) <= limit:
        return []
    return [f"{name} of {len(text):,} characters, over the limit of {limit:,}"]


def _list_values(value: dict[str, Any], label: str) -> dict[str, list[Any]]:
    """The list fields as normalise will read them (a list given as JSON text parsed,
    within the bounds of any JSON the file holds), to check them against the limits."""
    lists: dict[str, list[Any]] = {}
    for name in LIST_FIELDS:
        raw = value.get(name)
        if isinstance(raw, str) and raw.strip().startswith("["):
            try:
                parsed = jsontext.loads(raw.strip(), f"{label} has {name} that")
            except ValueError:
                parsed = None  # not JSON: kept as one item, like any other text
            except BadFile as refusal:
                if TOO_DEEP in refusal.message:
                    raise BadFile(f"{label} has {name} that {TOO_DEEP}") from None
                raise
            if isinstance(parsed, list):
                lists[name] = parsed
                continue
        lists[name] = normalise_list(raw)
    return lists


def _memory_over_limits(memory: Memory, lists: dict[str, list[Any]]) -> list[str]:
    over = [
        *_too_long("content", memory.content, MAX_CONTENT),
        *_too_long("gist", memory.gist.strip(), MAX_GIST),
        *_too_long("provenance", memory.provenance, MAX_REFERENCE),
        *_too_long("conversation_url", memory.conversation_url, MAX_REFERENCE),
        *_too_long("conversation_id", memory.conversation_id, MAX_REFERENCE),
        *_too_long("transcript_ref", memory.transcript_ref, MAX_REFERENCE),
        *_too_long("archive_reason", memory.archive_reason, MAX_REASON),
    ]
    for name in ("tags", "search_keywords"):
        items = [item for item in lists[name] if isinstance(item, str)]
        if len(items) > MAX_LIST_ITEMS:
            over.append(f"{len(items):,} {name}, over the limit of {MAX_LIST_ITEMS}")
        longest = max(map(len, items), default=0)
        if longest > MAX_ITEM_LENGTH:
            over.append(
                f"{name} with an entry of {longest:,} characters, over the limit of "
                f"{MAX_ITEM_LENGTH}"
            )
    links = [item for item in lists["linked_memories"] if isinstance(item, str)]
    if len(links) > MAX_LINKS:
        over.append(f"{len(links):,} linked_memories, over the limit of {MAX_LINKS}")
    return over


def _canonical_links(links: Any) -> Any:
    if not isinstance(links, list):
        return links
    return [
        str(pk) if isinstance(link, str) and (pk := _canonical(link)) else link for link in links
    ]


def _too_deep(value: Any) -> bool:
    """Whether lists and objects nest more than MAX_NESTING levels (found without recursion)."""
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth == jsontext.MAX_NESTING:
                return True
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return False


def _refuse_unreadable(value: Any, label: str) -> None:
    if _too_deep(value):  # parsed JSON handed over whole; a file's records never are
        raise BadFile(f"{label} {TOO_DEEP}")
    _refuse_unstorable(value, label)


def _refuse_unstorable(value: Any, label: str) -> None:
    """Text no database can store; name the record that has it."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if problem := unstorable(item):
                raise BadFile(f"{label} contains {problem} which cannot be stored")
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


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
        target = _canonical(link)
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
    with transaction.atomic():
        # One import per account at a time: a second one waits here, then finds the
        # first one's records present and skips them.
        get_user_model().objects.select_for_update().filter(pk=options.owner_id).exists()
        snapshot_id = take_snapshot(
            owner_id=options.owner_id, reason="before-import", now=options.now
        ).pk
        normalised_existing = normalise_stored(
            options.owner_id, source=ChangeSource.IMPORT, now=options.now, snapshot_reason=None
        ).migrated
        batch: list[_Record] = []
        for record in _records(reader, options):
            if record.position in plan.repeats:
                continue
            batch.append(record)
            if len(batch) == WRITE_BATCH:
                _write_batch(batch, plan, options, ahead)
                batch = []
        _write_batch(batch, plan, options, ahead)
        # A whole store arrives at once: let the planner see it before autovacuum would.
        transaction.on_commit(refresh_planner_statistics)
    return plan.summary(
        reader, dry_run=False, normalised_existing=normalised_existing, snapshot_id=snapshot_id
    )


def _new_in(
    batch: list[_Record], plan: _Plan, options: _Options
) -> tuple[list[Memory], list[Closing]]:
    """The records of the batch to write, with the ids they are stored under."""
    memories = [r.row for r in batch if isinstance(r.row, Memory)]
    closings = [r.row for r in batch if isinstance(r.row, Closing)]
    memory_owners = _owners_of(Memory, [m.pk for m in memories])
    closing_owners = _owners_of(Closing, [c.pk for c in closings])
    new_memories = [
        m
        for m in memories
        if memory_owners.get(m.pk) != options.owner_id and m.pk not in plan.copies
    ]
    new_closings = [
        c
        for c in closings
        if closing_owners.get(c.pk) != options.owner_id and c.pk not in plan.copies
    ]
    for closing in new_closings:
        if closing.pk in closing_owners:
            closing.id = uuid.uuid4()
    for memory in new_memories:
        if memory.pk in memory_owners and memory.pk not in plan.new_ids:
            # Taken by another account's import since the first read.
            plan.new_ids[memory.pk] = uuid.uuid4()
    return new_memories, new_closings


def _write_batch(
    batch: list[_Record],
    plan: _Plan,
    options: _Options,
    ahead: Vectors | None,
) -> None:
    if not batch:
        return
    new_memories, new_closings = _new_in(batch, plan, options)
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
