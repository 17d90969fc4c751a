"""Curating memories: promote, a person's edits, archive, unarchive, delete, compress, and
restoring a revision (SPEC §2, §4, §6)."""

import copy
import hashlib
import json
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from django.db import transaction

from memories.errors import (
    MemoryArchived,
    MixedCategories,
    NotAllYours,
    NothingToChange,
    RestoreOutdated,
    SomeArchived,
    TooFewToCompress,
    TooManyTags,
    UnknownRevision,
)
from memories.limits import (
    MAX_CONTENT,
    MAX_GIST,
    MAX_LIST_ITEMS,
    MAX_REASON,
    check_optional,
    check_text,
)
from memories.models import (
    Category,
    ChangeSource,
    Memory,
    Revision,
    RevisionAction,
    Salience,
    User,
)
from memories.recall.indexing import refresh_hashes, reindex, string_items, unindex
from memories.refs import IdPrefix, MemoryRef, Resolved
from memories.services._common import distinct, get_memory, now_or, record_revisions
from memories.services.normalise import normalise_salience
from memories.services.unit_of_work import change_memory, embed_ahead
from memories.shortids import resolve_prefixes
from memories.vocabulary import TRACKED_FIELDS, salience_rank

# A condition a change must still meet once its memory is locked (a suggestion's rule):
# it refuses with a DomainError, inside the change's transaction.
Requirement = Callable[[Memory], None]


@dataclass(frozen=True)
class Changed:
    """A memory as an archive or unarchive left it, and whether that changed anything."""

    memory: Memory
    changed: bool


def promote(
    *,
    owner: User,
    memory_id: MemoryRef,
    core: bool | None = None,
    salience: Salience | None = None,
    source: ChangeSource = ChangeSource.TOOL,
    now: datetime | None = None,
    require: Requirement | None = None,
) -> Memory:
    """Set core and/or salience as Claude curates (or a suggestion applied in the
    dashboard): this counts as an update (moves updated_at). `require` sees the memory
    locked, before anything else, and may refuse."""
    if core is None and salience is None:
        raise NothingToChange()
    moment = now_or(now)

    def curate(memory: Memory) -> None:
        if require is not None:
            require(memory)
        if memory.is_archived:
            raise MemoryArchived(memory.pk, "promote")
        memory.curate(core=core, salience=salience)
        memory.touch(moment)

    return change_memory(
        owner, memory_id, curate, source=source, action=RevisionAction.PROMOTE, now=moment
    )


def edit(
    *,
    owner: User,
    memory_id: MemoryRef,
    gist: str | None = None,
    core: bool | None = None,
    salience: Salience | None = None,
    source: ChangeSource,
    now: datetime | None = None,
) -> Memory:
    """A person's edit of the gist, core and/or salience (dashboard, admin): updated_at
    stays, so a demoted memory can roll out of the catalog window. A gist written here is
    no longer the one made from the content."""
    if gist is None and core is None and salience is None:
        raise NothingToChange()
    clean_gist = None if gist is None else check_text(gist.strip(), field="gist", limit=MAX_GIST)
    if clean_gist is None:
        action = RevisionAction.CURATE
    elif core is None and salience is None:
        action = RevisionAction.EDIT_GIST
    else:
        action = RevisionAction.EDIT

    def apply(memory: Memory) -> None:
        if clean_gist is not None:
            memory.rewrite_gist(clean_gist)
        memory.curate(core=core, salience=salience)

    return change_memory(
        owner,
        memory_id,
        apply,
        source=source,
        action=action,
        now=now_or(now),
        rewrites_text=clean_gist is not None,
    )


def set_curation(
    *,
    owner: User,
    memory_id: MemoryRef,
    core: bool | None = None,
    salience: Salience | None = None,
    source: ChangeSource,
    now: datetime | None = None,
) -> Memory:
    """A person sets core and/or salience (see `edit`)."""
    return edit(
        owner=owner, memory_id=memory_id, core=core, salience=salience, source=source, now=now
    )


def edit_gist(
    *,
    owner: User,
    memory_id: MemoryRef,
    gist: str,
    source: ChangeSource,
    now: datetime | None = None,
) -> Memory:
    """A person rewrites the gist (see `edit`)."""
    return edit(owner=owner, memory_id=memory_id, gist=gist, source=source, now=now)


def archive(
    *,
    owner: User,
    memory_id: MemoryRef,
    reason: str | None = None,
    source: ChangeSource = ChangeSource.TOOL,
    now: datetime | None = None,
    require: Requirement | None = None,
) -> Changed:
    """Hide a memory from reflect and recall, keeping it (and why). Archiving an archived
    memory changes nothing. `require` sees the memory locked, before anything else, and
    may refuse."""
    moment = now_or(now)
    clean_reason = check_optional(reason, field="reason", limit=MAX_REASON)
    was_archived = False

    def retire(memory: Memory) -> None:
        nonlocal was_archived
        if require is not None:
            require(memory)
        was_archived = memory.is_archived
        if not was_archived:
            memory.archive(clean_reason, moment)

    memory = change_memory(
        owner, memory_id, retire, source=source, action=RevisionAction.ARCHIVE, now=moment
    )
    return Changed(memory, changed=not was_archived)


def unarchive(
    *,
    owner: User,
    memory_id: MemoryRef,
    source: ChangeSource = ChangeSource.TOOL,
    now: datetime | None = None,
) -> Changed:
    """Bring an archived memory back. Unarchiving a live memory changes nothing."""
    was_archived = False

    def revive(memory: Memory) -> None:
        nonlocal was_archived
        was_archived = memory.is_archived
        memory.unarchive()

    memory = change_memory(
        owner, memory_id, revive, source=source, action=RevisionAction.UNARCHIVE, now=now_or(now)
    )
    return Changed(memory, changed=was_archived)


def delete(*, owner: User, memory_id: MemoryRef) -> uuid.UUID:
    """Remove a memory for good, with its revisions and index rows; its id."""
    with transaction.atomic():
        memory = get_memory(owner, memory_id, for_update=True)
        pk = memory.pk
        unindex([pk])
        memory.delete()
    return pk


@dataclass(frozen=True)
class Compressed:
    """The memory that stands for several, the originals it archived, and the prefixes
    among the ids given that named no single memory (skipped)."""

    memory: Memory
    originals: list[Memory]
    skipped: Resolved


def compress(
    *,
    owner: User,
    memory_ids: Sequence[MemoryRef],
    content: str,
    gist: str,
    category: Category | None = None,
    reason: str | None = None,
    now: datetime | None = None,
) -> Compressed:
    """Write one memory that stands for several (the caller wrote its text); archive them."""
    now = now_or(now)
    prefixes = [ref for ref in memory_ids if isinstance(ref, IdPrefix)]
    # A short id names its memory; one naming none or several is skipped, and named.
    resolved = resolve_prefixes(owner, [p.hex for p in prefixes])
    original_ids = distinct(
        [
            *(ref for ref in memory_ids if isinstance(ref, uuid.UUID)),
            *resolved.ids.values(),
        ]
    )
    if len(original_ids) < 2:
        raise TooFewToCompress(len(original_ids), resolved)
    clean_content = check_text(content, field="content", limit=MAX_CONTENT)
    clean_gist = check_text(gist.strip(), field="gist", limit=MAX_GIST)
    check_optional(reason, field="reason", limit=MAX_REASON)
    # Embedded before the write transaction, with the originals' tags as read without a
    # lock (reindex embeds again should they change meanwhile).
    unlocked = Memory.objects.for_owner(owner).in_bulk(original_ids).values()
    ahead = embed_ahead([Memory(content=clean_content, gist=clean_gist, tags=_all_tags(unlocked))])
    with transaction.atomic(durable=True):
        # Locked in id order, as every other writer locks several memories.
        locked = Memory.objects.for_owner(owner).filter(pk__in=original_ids).order_by("pk")
        found = {m.pk: m for m in locked.select_for_update()}
        if missing := [i for i in original_ids if i not in found]:
            raise NotAllYours(missing)
        originals = [found[i] for i in original_ids]
        if archived := [m.pk for m in originals if m.is_archived]:
            raise SomeArchived(archived)
        categories = {m.category for m in originals}
        if category is None and len(categories) != 1:
            raise MixedCategories(sorted(categories))
        tags = _all_tags(originals)
        if len(tags) > MAX_LIST_ITEMS:
            raise TooManyTags(len(tags), MAX_LIST_ITEMS)
        # Each salience as migrate would make it ("3" is high, a drifted one medium).
        salience = min((normalise_salience(m.salience) for m in originals), key=salience_rank)
        new = Memory(
            id=uuid.uuid4(),
            owner=owner,
            category=category or categories.pop(),
            content=clean_content,
            gist=clean_gist,
            salience=salience,
            core=any(m.core for m in originals),
            tags=tags,
            linked_memories=[str(m.pk) for m in originals],
            compression_level=max(m.compression_level for m in originals) + 1,
            created_at=now,
        )
        new.touch(now)
        refresh_hashes(new)
        new.save(force_insert=True)
        reindex([new], new=True, vectors=ahead)
        changes = []
        for memory in originals:
            changes.append((memory, memory.tracked_state()))
            memory.archive(f"compressed into {new.pk}", now)
            memory.save(update_fields=["archived_at", "archive_reason"])
        record_revisions(changes, source=ChangeSource.TOOL, action=RevisionAction.COMPRESS, now=now)
        reindex(originals, text_changed=False)
    return Compressed(new, originals, resolved)


def _all_tags(memories: Iterable[Memory]) -> list[str]:
    """The distinct tags of these memories, in order of first appearance."""
    tags: list[str] = []
    for memory in memories:
        for tag in string_items(memory.tags):
            if tag not in tags:
                tags.append(tag)
    return tags


@dataclass(frozen=True)
class Restored:
    memory: Memory
    revision: Revision


@dataclass(frozen=True)
class FieldChange:
    """One tracked field a restore would change: its value now, and as restored."""

    field: str
    now: Any
    then: Any


@dataclass(frozen=True)
class RestorePreview:
    """What restoring a revision would change, field by field, on the memory as it is now.
    `version` stands for that state: `restore_revision(expected_version=…)` applies the
    restore only while the memory is still in it, so it applies exactly these changes."""

    revision: Revision
    memory: Memory
    use: Literal["before", "after"]
    changes: list[FieldChange]
    version: str


def state_version(memory: Memory) -> str:
    """A checksum of a memory's tracked fields: equal exactly when they are."""
    state = json.dumps(memory.tracked_state(), sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(state.encode()).hexdigest()


def _own_revision(owner: User, revision_id: int) -> Revision:
    revision = None
    # A number a revision id can be (a bigint); anything else names none.
    if type(revision_id) is int and 0 < revision_id < 2**63:
        revision = Revision.objects.filter(pk=revision_id, owner=owner).first()
    if revision is None:
        raise UnknownRevision(revision_id)
    return revision


def _revision_state(owner: User, revision_id: int, use: str) -> tuple[Revision, dict[str, Any]]:
    """The owner's revision, and the state it recorded before or after its change."""
    if use not in ("before", "after"):
        raise ValueError(f"use must be 'before' or 'after', not {use!r}")
    revision = _own_revision(owner, revision_id)
    return revision, revision.before if use == "before" else revision.after


def preview_restore(
    *, owner: User, revision_id: int, use: Literal["before", "after"] = "before"
) -> RestorePreview:
    """What `restore_revision` would change now (a read: nothing is written)."""
    revision, state = _revision_state(owner, revision_id, use)
    memory = get_memory(owner, revision.memory_id)
    restored = copy.copy(memory)
    restored.restore_tracked_state(state)
    now, then = memory.tracked_state(), restored.tracked_state()
    changes = [FieldChange(name, now[name], then[name]) for name in TRACKED_FIELDS]
    return RestorePreview(
        revision=revision,
        memory=memory,
        use=use,
        changes=[change for change in changes if change.now != change.then],
        version=state_version(memory),
    )


def restore_revision(
    *,
    owner: User,
    revision_id: int,
    source: ChangeSource,
    use: Literal["before", "after"] = "before",
    expected_version: str | None = None,
    now: datetime | None = None,
) -> Restored:
    """Put a memory's tracked fields back as a revision recorded them (leaves a revision).

    `use="before"` returns to the state before that change, `"after"` to the state it made.
    updated_at does not move. With `expected_version` (a RestorePreview's), the memory
    must still be as previewed, checked under its lock: RestoreOutdated otherwise.
    """
    revision, state = _revision_state(owner, revision_id, use)

    def put_back(memory: Memory) -> None:
        if expected_version is not None and state_version(memory) != expected_version:
            raise RestoreOutdated(revision.pk, memory.pk)
        memory.restore_tracked_state(state)
        memory.touch(memory.updated_at)  # the last touch as the restored state makes it

    memory = change_memory(
        owner,
        revision.memory_id,
        put_back,
        source=source,
        action=RevisionAction.RESTORE,
        now=now_or(now),
        rewrites_text=True,
    )
    return Restored(memory, revision)
