"""Import a store: our own export, an original Taproot (Cloudflare KV) backup, or a bare
JSON array of memory records (SPEC §7).

The whole file is read and checked before anything is written: one bad record refuses
the file and changes nothing. Then, in one transaction: a snapshot of the whole store,
the new records (normalised by the same function migrate uses), and the normalisation
of the records already there. Imports into one account run one at a time.
"""

import copy
import json
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction

from memories.bulkwrite import WRITE_BATCH
from memories.conf import embedder
from memories.errors import InvalidInput
from memories.indexing import Vectors, refresh_hashes
from memories.limits import unstorable
from memories.maintenance import refresh_planner_statistics
from memories.models import ChangeSource, Closing, Memory, User
from memories.quoting import shown
from memories.services._common import now_or, record_revisions, reindex_in_batches
from memories.services.exporting import CLOSING_PREFIX, EXPORT_FORMAT, MEMORY_PREFIX
from memories.services.normalise import (
    LIST_FIELDS,
    normalise,
    normalise_list,
    normalise_stored,
)
from memories.services.snapshots import take_snapshot
from memories.services.unit_of_work import embed_ahead
from memories.timeutil import parse_timestamp
from memories.vocabulary import last_touch_of

# Reserved tags of the original Taproot.
ARCHIVE_PENDING = "_archive_pending"
COMPRESS_PENDING = "_compress_pending"
ORIGINAL_ARCHIVE_REASON = "archived in the original"
SHAPES = (
    "an export envelope (an object with an 'entries' list of {key, value, metadata}) or a "
    "JSON array of memory records"
)
# Far deeper than any record Taproot or the original writes (a few levels), and shallow
# enough that copying, checking and storing a record never meets Python's recursion limit.
MAX_NESTING = 100
TOO_DEEP = f"nests lists or objects more than {MAX_NESTING} levels deep"


class BadFile(InvalidInput):
    def __init__(self, problem: str) -> None:
        super().__init__(
            f"The file was not imported: {problem}. Nothing was changed; fix the file and "
            "import it again."
        )


@dataclass(frozen=True)
class Imported:
    """What an import did. `snapshot_id` is the whole-store snapshot taken before it, or
    None when nothing was new (then nothing changed and no snapshot was written)."""

    memories: int
    memories_skipped: int  # already in the store
    reminted: int  # records given a new id, because another user holds theirs
    closings: int
    closings_skipped: int
    normalised: int  # imported records normalised on the way in
    normalised_existing: int  # records already in the store normalised alongside
    ignored_keys: int  # envelope entries that are neither memories nor closings
    snapshot_id: int | None

    @property
    def message(self) -> str:
        """What happened, in a sentence for the operator's tools."""
        skipped = self.memories_skipped + self.closings_skipped
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


@dataclass
class Incoming:
    """What the file holds, checked and turned into unsaved rows."""

    memories: list[tuple[str, Memory]] = field(default_factory=list)
    closings: list[tuple[str, Closing]] = field(default_factory=list)
    ignored_keys: int = 0


def import_store(
    *,
    owner: User,
    # Any: a file as read (text or bytes) or its parsed JSON, which may hold anything; the
    # service checks every part of it and refuses what does not fit, naming where.
    data: Any,
    now: datetime | None = None,
) -> Imported:
    """Import `data` (the file's text or bytes, or its parsed JSON) into owner's store."""
    now = now_or(now)
    incoming = read_file(data, owner_id=owner.pk, now=now)
    try:
        return _import(incoming, owner_id=owner.pk, now=now)
    except IntegrityError:
        pass
    # An import into another account wrote some of the same ids after this one looked.
    # Once more from the file (the first try changed its rows in place), now that they
    # are there: those records get new ids.
    try:
        return _import(read_file(data, owner_id=owner.pk, now=now), owner_id=owner.pk, now=now)
    except IntegrityError:
        raise InvalidInput(
            "The file was not imported: another import was writing records with the same "
            "ids at the same moment. Nothing was changed; import it again."
        ) from None


def _import(incoming: Incoming, *, owner_id: int, now: datetime) -> Imported:
    ahead = _embed_ahead(incoming)
    with transaction.atomic():
        # One import per account at a time: a second one waits here, then finds the
        # first one's records present and skips them.
        get_user_model().objects.select_for_update().filter(pk=owner_id).exists()
        summary = _load(incoming, owner_id=owner_id, now=now, vectors=ahead)
        # A whole store arrives at once: let the planner see it before autovacuum would.
        transaction.on_commit(refresh_planner_statistics)
    return summary


# Reading and checking the file ---------------------------------------------------------


def read_file(data: Any, *, owner_id: int, now: datetime) -> Incoming:
    if isinstance(data, bytes | str):
        try:
            data = json.loads(data)
        except RecursionError:
            raise BadFile(f"it {TOO_DEEP}") from None
        except (ValueError, UnicodeDecodeError) as error:
            raise BadFile(f"it is not JSON ({error})") from None
    incoming = Incoming()
    if isinstance(data, list):
        for index, value in enumerate(data, start=1):
            label = _record_label(index, value)
            if not isinstance(value, dict):
                raise BadFile(f"{label} is not an object")
            incoming.memories.append((label, _memory(value, None, label, owner_id, now)))
    elif isinstance(data, dict) and isinstance(data.get("entries"), list):
        if "format" in data and data["format"] != EXPORT_FORMAT:
            raise BadFile(
                f"its format is {shown(data['format'])}; this version reads {EXPORT_FORMAT!r} and "
                "backups of the original Taproot"
            )
        for index, entry in enumerate(data["entries"], start=1):
            _read_entry(incoming, index, entry, owner_id, now)
    else:
        raise BadFile(f"it is not one of the shapes Taproot reads: {SHAPES}")
    _refuse_repeats([memory.pk for _, memory in incoming.memories], "memory")
    _refuse_repeats([closing.pk for _, closing in incoming.closings], "closing")
    return incoming


def _record_label(index: int, value: Any) -> str:
    if isinstance(value, dict) and isinstance(value.get("id"), str):
        return f"record {index} (id {shown(value['id'])})"
    return f"record {index}"


def _read_entry(incoming: Incoming, index: int, entry: Any, owner_id: int, now: datetime) -> None:
    if not isinstance(entry, dict) or not isinstance(entry.get("key"), str):
        raise BadFile(f"entry {index} is not an object with a text 'key'")
    key: str = entry["key"]
    label = f"entry {index} ({shown(key)})"
    if key.startswith(MEMORY_PREFIX):
        value = _entry_value(entry, label)
        key_id = key[len(MEMORY_PREFIX) :]
        incoming.memories.append((label, _memory(value, key_id, label, owner_id, now)))
    elif key.startswith(CLOSING_PREFIX):
        value = _entry_value(entry, label)
        key_id = key[len(CLOSING_PREFIX) :]
        incoming.closings.append((label, _closing(value, key_id, label, owner_id, now)))
    else:
        # Sessions, backups and anything else the original kept in the same namespace.
        incoming.ignored_keys += 1


def _entry_value(entry: dict[str, Any], label: str) -> dict[str, Any]:
    value = entry.get("value")
    if isinstance(value, str):
        # Cloudflare KV hands values back as text unless asked for JSON.
        try:
            value = json.loads(value)
        except RecursionError:
            raise BadFile(f"{label} {TOO_DEEP}") from None
        except ValueError:
            value = None
    if not isinstance(value, dict):
        raise BadFile(f"{label} has no record object as its value")
    return value


def _id(value: dict[str, Any], key_id: str | None, label: str) -> uuid.UUID:
    raw = value.get("id", key_id)
    try:
        pk = uuid.UUID(raw.strip()) if isinstance(raw, str) else None
    except ValueError:
        pk = None
    if pk is None:
        raise BadFile(f"{label} has an id that is not a UUID ({shown(raw)})")
    if key_id is not None and "id" in value:
        try:
            same = uuid.UUID(key_id.strip()) == pk
        except ValueError:
            same = True  # a key without a UUID: the value's id stands
        if not same:
            raise BadFile(f"{label} holds a record whose id {shown(raw)} differs from its key")
    return pk


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


def _memory(
    value: dict[str, Any], key_id: str | None, label: str, owner_id: int, now: datetime
) -> Memory:
    """An unsaved memory holding the record's values as given (normalised later)."""
    pk = _id(value, key_id, label)
    _refuse_unreadable(value, label)
    _refuse_deep_list_text(value, label)
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
    created_at = _timestamp(value, "created_at", label)
    updated_at = _timestamp(value, "updated_at", label) or created_at or now
    memory = Memory(
        id=pk,
        owner_id=owner_id,
        **as_given,
        content=content,
        gist=gist if isinstance(gist := value.get("gist"), str) else "",
        gist_autogenerated=value.get("gist_autogenerated") is True,
        core=_flag(value.get("core")),
        tags=copy.deepcopy(value.get("tags", [])),
        search_keywords=copy.deepcopy(value.get("search_keywords", [])),
        linked_memories=copy.deepcopy(value.get("linked_memories", [])),
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
    refresh_hashes(memory)
    return memory


def _closing(
    value: dict[str, Any], key_id: str | None, label: str, owner_id: int, now: datetime
) -> Closing:
    pk = _id(value, key_id, label)
    _refuse_unreadable(value, label)
    reflection = value.get("reflection")
    if not isinstance(reflection, str) or not reflection.strip():
        raise BadFile(f"{label} has no reflection (it must be non-blank text)")
    return Closing(
        id=pk,
        owner_id=owner_id,
        reflection=reflection.strip(),  # as a closing is stored
        conversation_title=_text(value.get("conversation_title")),
        conversation_url=_text(value.get("conversation_url")),
        created_at=_timestamp(value, "created_at", label) or now,
    )


def _too_deep(value: Any) -> bool:
    """Whether lists and objects nest more than MAX_NESTING levels (found without recursion)."""
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth == MAX_NESTING:
                return True
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return False


def _refuse_unreadable(value: Any, label: str) -> None:
    if _too_deep(value):
        raise BadFile(f"{label} {TOO_DEEP}")
    _refuse_unstorable(value, label)


def _refuse_deep_list_text(value: dict[str, Any], label: str) -> None:
    """A list field given as JSON text is parsed later (normalise_list); refuse it now if
    that text nests too deeply, rather than store it as one odd tag."""
    for name in LIST_FIELDS:
        text = value.get(name)
        if not isinstance(text, str) or not text.lstrip().startswith("["):
            continue
        try:
            too_deep = _too_deep(json.loads(text))
        except RecursionError:
            too_deep = True
        except ValueError:
            continue  # not JSON: kept as one item, like any other text
        if too_deep:
            raise BadFile(f"{label} has {name} that {TOO_DEEP}")


def _refuse_unstorable(value: Any, label: str) -> None:
    """Text no database can store; name the record that has it."""
    if isinstance(value, str):
        if problem := unstorable(value):
            raise BadFile(f"{label} contains {problem} which cannot be stored")
    elif isinstance(value, dict):
        for item in value.values():
            _refuse_unstorable(item, label)
    elif isinstance(value, list):
        for item in value:
            _refuse_unstorable(item, label)


def _refuse_repeats(ids: list[uuid.UUID], kind: str) -> None:
    seen: set[uuid.UUID] = set()
    for pk in ids:
        if pk in seen:
            raise BadFile(f"the {kind} id {pk} appears more than once")
        seen.add(pk)


# Loading -------------------------------------------------------------------------------


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
        try:
            target = uuid.UUID(link.strip())
        except ValueError:
            remapped.append(link)
            continue
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


def _embed_ahead(incoming: Incoming) -> Vectors | None:
    """The vectors of the incoming memories as they will be stored (quirks applied and
    normalised, on copies), embedded before the write transaction."""
    if embedder() is None:
        return None
    drafts = []
    for _, memory in incoming.memories:
        draft = copy.deepcopy(memory)
        apply_original_quirks(draft)
        normalise(draft)
        drafts.append(draft)
    return embed_ahead(drafts)


def _load(
    incoming: Incoming, *, owner_id: int, now: datetime, vectors: Vectors | None = None
) -> Imported:
    memory_owners = _owners_of(Memory, [m.pk for _, m in incoming.memories])
    closing_owners = _owners_of(Closing, [c.pk for _, c in incoming.closings])
    # An id another user holds gets a new id, unless an earlier import already did that.
    memory_copies = _earlier_copies(
        Memory,
        [m for _, m in incoming.memories if memory_owners.get(m.pk, owner_id) != owner_id],
        owner_id,
        "content",
    )
    closing_copies = _earlier_copies(
        Closing,
        [c for _, c in incoming.closings if closing_owners.get(c.pk, owner_id) != owner_id],
        owner_id,
        "reflection",
    )
    new_memories = [
        m
        for _, m in incoming.memories
        if memory_owners.get(m.pk) != owner_id and m.pk not in memory_copies
    ]
    new_closings = [
        c
        for _, c in incoming.closings
        if closing_owners.get(c.pk) != owner_id and c.pk not in closing_copies
    ]
    skipped = len(incoming.memories) - len(new_memories)
    closings_skipped = len(incoming.closings) - len(new_closings)
    new_ids = {m.pk: uuid.uuid4() for m in new_memories if m.pk in memory_owners}
    reminted = len(new_ids)
    new_ids.update(memory_copies)  # links to a record copied earlier point at the copy

    snapshot_id = None
    normalised_existing = 0
    revised = []
    normalised = 0
    if new_memories or new_closings:
        snapshot_id = take_snapshot(owner_id=owner_id, reason="before-import", now=now).pk
        normalised_existing = normalise_stored(
            owner_id, source=ChangeSource.IMPORT, now=now, snapshot_reason=None
        ).migrated
        for memory in new_memories:
            before = memory.tracked_state()
            quirks = apply_original_quirks(memory)
            if normalise(memory) or quirks:
                normalised += 1
            memory.linked_memories = _remap_links(memory.linked_memories, new_ids)
            memory.id = new_ids.get(memory.pk, memory.pk)
            revised.append((memory, before))
        for closing in new_closings:
            if closing.pk in closing_owners:
                closing.id = uuid.uuid4()
                reminted += 1
        Memory.objects.bulk_create(new_memories, batch_size=WRITE_BATCH)
        Closing.objects.bulk_create(new_closings, batch_size=WRITE_BATCH)
        record_revisions(revised, source=ChangeSource.IMPORT, action="import", now=now)
        reindex_in_batches(new_memories, new=True, vectors=vectors)
    return Imported(
        memories=len(new_memories),
        memories_skipped=skipped,
        reminted=reminted,
        closings=len(new_closings),
        closings_skipped=closings_skipped,
        normalised=normalised,
        normalised_existing=normalised_existing,
        ignored_keys=incoming.ignored_keys,
        snapshot_id=snapshot_id,
    )
