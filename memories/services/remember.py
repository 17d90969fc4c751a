"""Remembering: create a memory, or update one in place (SPEC §4)."""

import uuid
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any

from django.db import connection, transaction

from memories.errors import BlankText, MemoryArchived, NothingToChange, TooManyItems
from memories.limits import (
    MAX_CONTENT,
    MAX_GIST,
    MAX_ITEM_LENGTH,
    MAX_LINKS,
    check_items,
    check_optional,
    check_text,
)
from memories.models import (
    Category,
    ChangeSource,
    EpistemicStatus,
    Memory,
    RevisionAction,
    Salience,
    User,
)
from memories.recall.indexing import INDEXED_TEXT, Vectors, embedding_text, refresh_hashes, reindex
from memories.refs import IdPrefix, MemoryRef, Resolved
from memories.services import retries
from memories.services._common import distinct, now_or
from memories.services.unit_of_work import change_memory, embed_ahead
from memories.shortids import resolve_memory_id, resolve_prefixes

# The texts a draft may clear: given as "" (or blank), they are stored as none.
_CLEARABLE = ("provenance", "conversation_id", "transcript_ref", "conversation_url")


@dataclass(frozen=True)
class MemoryDraft:
    """What a new memory is made of, or what an update changes: a field left None is not
    given (it keeps its value, or takes its default when creating). A new memory needs a
    category, content and gist. The four reference texts are cleared by a blank one."""

    category: Category | None = None
    content: str | None = None
    gist: str | None = None
    salience: Salience | None = None
    core: bool | None = None
    epistemic_status: EpistemicStatus | None = None
    provenance: str | None = None
    conversation_id: str | None = None
    transcript_ref: str | None = None
    conversation_url: str | None = None
    tags: list[str] | None = None
    search_keywords: list[str] | None = None
    linked_memories: list[MemoryRef] | None = None

    def given(self) -> dict[str, Any]:
        """The fields given, checked against the limits and ready to set on a memory (links
        left out: they are resolved against the store)."""
        values: dict[str, Any] = {}
        for name in (f.name for f in fields(self) if f.name != "linked_memories"):
            value = getattr(self, name)
            if value is None:
                continue
            if name == "content":
                value = check_text(value, field=name, limit=MAX_CONTENT)
            elif name == "gist":
                value = check_text(value.strip(), field=name, limit=MAX_GIST)
            elif name in _CLEARABLE:
                value = check_optional(value.strip(), field=name)
            elif name in ("tags", "search_keywords"):
                value = check_items(list(value), field=name, max_length=MAX_ITEM_LENGTH)
            values[name] = value
        if self.linked_memories is not None and len(self.linked_memories) > MAX_LINKS:
            raise TooManyItems("linked_memories", MAX_LINKS, len(self.linked_memories))
        return values


@dataclass(frozen=True)
class Duplicate:
    """A live memory of the owner's with the same normalised content (or else gist)."""

    memory_id: uuid.UUID
    same: str  # "content" or "gist"


@dataclass(frozen=True)
class Remembered:
    """The memory as written; whether it is new; a live memory it repeats (new ones only);
    the links dropped because they name no memory of the owner's; and the link prefixes
    that named none or several (skipped)."""

    memory: Memory
    created: bool
    duplicate: Duplicate | None = None
    dropped_links: list[uuid.UUID] = field(default_factory=list)
    skipped_links: Resolved = field(default_factory=Resolved)
    already_stored: bool = False  # a retry: `memory` is the one stored the first time


def remember(
    *,
    owner: User,
    draft: MemoryDraft,
    update: MemoryRef | None = None,
    source: ChangeSource = ChangeSource.TOOL,
    now: datetime | None = None,
    vectors: Vectors | None = None,
) -> Remembered:
    """Create a memory from a draft, or update `update` changing only what the draft
    gives. Everything is checked before anything is written. `vectors`: a new memory's,
    embedded ahead by the caller (see memories.recall.indexing.vectors_for); embedded here when
    not given, or given for other text."""
    now = now_or(now)
    # A short id names its memory from here on (refused when it names none or several).
    update_id = None if update is None else resolve_memory_id(owner, update)
    values = draft.given()
    if update_id is None:
        for required in ("category", "content", "gist"):
            if required not in values:
                raise BlankText(required)
    elif not values and draft.linked_memories is None:
        raise NothingToChange()
    if update_id is not None:
        return _update(owner, update_id, draft, values, source, now)
    # Embedded before the write transaction: on SQLite it holds the one write lock.
    new = Memory(id=uuid.uuid4(), owner=owner, created_at=now, **values)
    if vectors is None or embedding_text(new) not in vectors.by_text:
        vectors = embed_ahead([new])
    # A new memory takes eight statements in this transaction: the duplicate check (content
    # and gist at once), the memory, its recall entry, its tag rows (none without tags),
    # its token rows, the owner's live count and version, the change recorded at that
    # version (memories.recall.postings follows writes by it), and its vector. Each writes
    # another table, and the token rows and the change need the entry's generated id, so
    # on SQLite none can be folded into another.
    with transaction.atomic(durable=True):
        dropped: list[uuid.UUID] = []
        skipped = Resolved()
        if draft.linked_memories is not None:
            new.linked_memories, dropped, skipped = _own_links(owner, draft.linked_memories, new.pk)
        retries.hold(owner, "remember", {**values, "linked_memories": new.linked_memories})
        refresh_hashes(new)
        duplicate = _find_duplicate(new)
        twin = None if duplicate is None else _twin(new, duplicate, now)
        if twin is not None:
            return Remembered(twin, True, None, dropped, skipped, already_stored=True)
        _create(new, now, vectors)
    return Remembered(new, True, duplicate, dropped, skipped)


def _update(
    owner: User,
    update_id: uuid.UUID,
    draft: MemoryDraft,
    values: dict[str, Any],
    source: ChangeSource,
    now: datetime,
) -> Remembered:
    """Change only what the draft gives (the memory must be live): updated_at moves. The
    memory is read under a lock and written with its revision, then its index rows
    (entry, tokens, tags, vector) are replaced and the owner's version moves."""
    dropped: list[uuid.UUID] = []
    skipped = Resolved()
    if draft.linked_memories is not None:
        values["linked_memories"], dropped, skipped = _own_links(
            owner, draft.linked_memories, update_id
        )

    def apply(memory: Memory) -> None:
        if memory.is_archived:
            raise MemoryArchived(memory.pk, "update")
        for name, value in values.items():
            setattr(memory, name, value)
        if "gist" in values:
            memory.gist_autogenerated = False
        memory.touch(now)

    memory = change_memory(
        owner,
        update_id,
        apply,
        source=source,
        action=RevisionAction.UPDATE,
        now=now,
        rewrites_text=bool(INDEXED_TEXT & values.keys()),
    )
    return Remembered(memory, False, None, dropped, skipped)


def _own_links(
    owner: User, links: list[MemoryRef], self_id: uuid.UUID
) -> tuple[list[str], list[uuid.UUID], Resolved]:
    """The owner's existing memories among `links` (whole ids or prefixes), as stored; the
    whole ids that name none of them (dropped); and what the prefixes named (those naming
    none or several are skipped)."""
    prefixes = [ref.hex for ref in links if isinstance(ref, IdPrefix)]
    resolved = resolve_prefixes(owner, prefixes)
    ids = distinct([*(ref for ref in links if isinstance(ref, uuid.UUID)), *resolved.ids.values()])
    known = set(Memory.objects.for_owner(owner).filter(pk__in=ids).values_list("pk", flat=True))
    kept = [str(i) for i in ids if i in known and i != self_id]
    return kept, [i for i in ids if i not in known], resolved


def _create(memory: Memory, now: datetime, vectors: Vectors | None) -> None:
    memory.gist_autogenerated = False
    memory.touch(now)
    memory.save(force_insert=True)
    reindex([memory], new=True, vectors=vectors)


_DRAFTED = [f.name for f in fields(MemoryDraft)]


def _twin(new: Memory, duplicate: Duplicate, now: datetime) -> Memory | None:
    """The memory `new` repeats field for field, stored by the same owner within the
    retry window (see memories.services.retries); only looked for when the duplicate
    check found one with the same content, so a first call costs nothing more."""
    since = retries.since(now)
    if since is None or duplicate.same != "content":
        return None
    candidates = Memory.objects.for_owner(new.owner).filter(
        archived_at__isnull=True,
        content_hash=new.content_hash,
        created_at__gte=since,
        gist_autogenerated=False,
    )
    for candidate in candidates.order_by("-created_at"):
        if all(getattr(candidate, name) == getattr(new, name) for name in _DRAFTED):
            return candidate
    return None


def _find_duplicate(memory: Memory) -> Duplicate | None:
    """A live memory of the owner's with the same normalised content, else the same gist,
    and which of the two it shares.

    One statement, each half answered by its partial hash index; written out, because the
    ORM takes longer to compose a union than the database takes to answer it. An empty
    digest (text of punctuation alone) matches nothing.
    """
    with connection.cursor() as cursor:
        cursor.execute(
            _DUPLICATE,
            [
                memory.owner_id,
                memory.content_hash or None,
                memory.owner_id,
                memory.gist_hash or None,
            ],
        )
        found = cursor.fetchone()
    if found is None:
        return None
    return Duplicate(Memory._meta.pk.to_python(found[0]), ("content", "gist")[found[1]])


_DUPLICATE = f"""
SELECT id, 0 FROM {Memory._meta.db_table}
WHERE owner_id = %s AND archived_at IS NULL AND content_hash = %s
UNION ALL
SELECT id, 1 FROM {Memory._meta.db_table}
WHERE owner_id = %s AND archived_at IS NULL AND gist_hash = %s
ORDER BY 2 LIMIT 1
"""
