"""taproot_remember: create a memory, or update one in place (SPEC §4)."""

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection, transaction

from memories.errors import InvalidInput
from memories.indexing import INDEXED_TEXT, Vectors, refresh_hashes, reindex, vectors_for
from memories.models import ChangeSource, Memory, User
from memories.services._common import (
    get_memory,
    now_or,
    record_revisions,
    touch,
)
from memories.services.loaded import with_reflect_hint
from memories.shortids import resolve_memory_id, resolve_prefixes, skipped_prefixes_warning
from memories.validation import (
    MAX_CONTENT,
    MAX_GIST,
    MAX_LINKS,
    coerce_bool,
    coerce_category,
    coerce_epistemic_status,
    coerce_memory_id,
    coerce_salience,
    coerce_string_list,
    optional_text,
    parse_memory_ref,
    require_text,
    trimmed,
)
from memories.vocabulary import CATEGORY_VALUES

GIST_WHY = (
    "A new memory needs a gist now: one line of about 15 words that stands for it in the "
    "catalog loaded at the start of every conversation. It is cheapest to write while the "
    "memory is fresh."
)


# Over the complexity limit until the typed-services change of issue 21 splits it.
def remember(  # noqa: C901
    *,
    owner: User,
    category: Any = None,
    content: Any = None,
    gist: Any = None,
    salience: Any = None,
    core: Any = None,
    epistemic_status: Any = None,
    provenance: Any = None,
    tags: Any = None,
    linked_memories: Any = None,
    conversation_id: Any = None,
    transcript_ref: Any = None,
    conversation_url: Any = None,
    search_keywords: Any = None,
    update_id: Any = None,
    source: ChangeSource = ChangeSource.TOOL,
    now: datetime | None = None,
) -> dict[str, Any]:
    """Create a memory, or update `update_id` changing only the fields given (None = not given).

    Category, content and gist are required only when creating. Everything is validated
    before anything is written.
    """
    now = now_or(now)
    if isinstance(update_id, str) and not update_id.strip():
        update_id = None  # models send "" for an argument they mean to leave out
    if update_id is not None:
        # A short id names its memory from here on (refused when it names none or several).
        update_id = str(resolve_memory_id(owner, update_id, field="update_id"))
    creating = update_id is None
    warnings: list[str] = []
    fields: dict[str, Any] = {}
    if category is not None:
        fields["category"], warning = coerce_category(category)
        if warning:
            warnings.append(warning)
    elif creating:
        raise InvalidInput(
            f"category is required when creating a memory: one of {', '.join(CATEGORY_VALUES)}."
        )
    if content is not None:
        why = "" if creating else "Leave content out to keep the memory's content as it is."
        fields["content"] = require_text(content, field="content", limit=MAX_CONTENT, why=why)
    elif creating:
        raise InvalidInput(
            "content is required when creating a memory: the memory in full, as non-blank text."
        )
    if gist is not None:
        fields["gist"] = require_text(trimmed(gist), field="gist", limit=MAX_GIST, why=GIST_WHY)
    elif creating:
        raise InvalidInput(f"gist is required when creating a memory. {GIST_WHY}")
    if salience is not None:
        fields["salience"], warning = coerce_salience(salience)
        if warning:
            warnings.append(warning)
    if core is not None:
        fields["core"] = coerce_bool(core, field="core")
    if epistemic_status is not None:
        fields["epistemic_status"] = coerce_epistemic_status(epistemic_status)
    for name, value in (
        ("provenance", provenance),
        ("conversation_id", conversation_id),
        ("transcript_ref", transcript_ref),
        ("conversation_url", conversation_url),
    ):
        if value is not None:
            fields[name] = optional_text(value, field=name)
    if tags is not None:
        fields["tags"] = coerce_string_list(tags, field="tags")
    if search_keywords is not None:
        fields["search_keywords"] = coerce_string_list(search_keywords, field="search_keywords")
    links = None
    if linked_memories is not None:
        links = coerce_string_list(
            linked_memories, field="linked_memories", max_items=MAX_LINKS, max_length=100
        )
    if not creating and not fields and links is None:
        raise InvalidInput(
            "Nothing to update: send update_id together with the fields to change "
            "(only those change)."
        )

    # Embedded before the write transaction: on SQLite it holds the one write lock.
    ahead = _embed_ahead(owner, update_id, fields, now)
    # A new memory takes seven statements in this transaction: the duplicate check (content
    # and gist at once), the memory, its recall entry, its tag rows (none without tags),
    # its token rows, the owner's live count and version, and its vector. Each writes
    # another table, and the token rows need the entry's generated id, so on SQLite none
    # can be folded into another. An update reads the memory under a lock, writes it and
    # its revision, then replaces its index rows (entry, tokens, tags, vector) and moves
    # the owner's version. After the transaction, one read says whether a reflect is due.
    with transaction.atomic():
        if update_id is not None:
            memory = get_memory(owner, update_id, for_update=True, field="update_id")
            if memory.is_archived:
                raise InvalidInput(
                    f"Memory {memory.pk} is archived and cannot be updated; unarchive it "
                    "first with taproot_forget(action='unarchive')."
                )
        else:
            memory = Memory(id=ahead.memory_id, owner=owner, created_at=now)
        if links is not None:
            fields["linked_memories"] = _own_links(owner, links, memory.pk, warnings)
        if creating:
            reply = _create(memory, fields, warnings, now, ahead.vectors)
        else:
            reply = _update(memory, fields, warnings, source, now, ahead.vectors)
    return with_reflect_hint(reply, owner, now=now)


@dataclass(frozen=True)
class _Ahead:
    memory_id: uuid.UUID
    vectors: Vectors | None


def _embed_ahead(owner: User, update_id: Any, fields: dict[str, Any], now: datetime) -> _Ahead:
    """The memory's vector as it will be after this write, computed before the write: for
    a new memory from the fields given, for an update from the stored memory read without
    a lock (if another write changes its text meanwhile, reindex embeds it again)."""
    if update_id is None:
        draft = Memory(id=uuid.uuid4(), owner=owner, created_at=now, **fields)
    elif INDEXED_TEXT & fields.keys():
        try:
            memory_id = coerce_memory_id(update_id, field="update_id")
        except InvalidInput:
            return _Ahead(uuid.uuid4(), None)  # refused inside, with the usual message
        stored = Memory.objects.for_owner(owner).filter(pk=memory_id).first()
        if stored is None:
            return _Ahead(memory_id, None)
        draft = stored
        for name, value in fields.items():
            setattr(draft, name, value)
    else:
        return _Ahead(uuid.uuid4(), None)
    return _Ahead(draft.pk, vectors_for([draft]))


def _own_links(owner: User, links: list[str], self_id: uuid.UUID, warnings: list[str]) -> list[str]:
    """The caller's existing memories among `links` (whole ids or short ones); anything
    else is dropped with a warning (a malformed id names no memory, just like an unknown
    one, and a prefix naming several is named with its candidates)."""
    ids: list[uuid.UUID] = []
    dropped: list[str] = []
    prefixes: dict[str, str] = {}
    for link in links:
        memory_ref = parse_memory_ref(link)
        if memory_ref is None:
            dropped.append(link)
            continue
        if isinstance(memory_ref, str):
            prefixes.setdefault(memory_ref, link)
        elif memory_ref not in ids:
            ids.append(memory_ref)
    resolved = resolve_prefixes(owner, list(prefixes))
    ids.extend(i for i in resolved.ids.values() if i not in ids)
    if resolved.ambiguous or resolved.unknown:
        warnings.append(skipped_prefixes_warning("linked_memories", resolved, prefixes))
    known = set(Memory.objects.for_owner(owner).filter(pk__in=ids).values_list("pk", flat=True))
    kept = [str(i) for i in ids if i in known and i != self_id]
    dropped.extend(str(i) for i in ids if i not in known)
    if dropped:
        warnings.append(
            "linked_memories: dropped ids that are not your memories: " + ", ".join(dropped)
        )
    return kept


def _create(
    memory: Memory,
    fields: dict[str, Any],
    warnings: list[str],
    now: datetime,
    vectors: Vectors | None,
) -> dict[str, Any]:
    for name, value in fields.items():
        setattr(memory, name, value)
    memory.gist_autogenerated = False
    touch(memory, now)
    refresh_hashes(memory)
    duplicate = _find_duplicate(memory)
    memory.save(force_insert=True)
    reindex([memory], new=True, vectors=vectors)
    if duplicate is not None:
        warnings.append(
            f"A live memory with the same {duplicate[1]} already exists: {duplicate[0]}. "
            "If this is the same thing, update that one with update_id instead."
        )
    return _reply("created", memory, warnings)


def _find_duplicate(memory: Memory) -> tuple[str, str] | None:
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
    return str(Memory._meta.pk.to_python(found[0])), ("content", "gist")[found[1]]


_DUPLICATE = f"""
SELECT id, 0 FROM {Memory._meta.db_table}
WHERE owner_id = %s AND archived_at IS NULL AND content_hash = %s
UNION ALL
SELECT id, 1 FROM {Memory._meta.db_table}
WHERE owner_id = %s AND archived_at IS NULL AND gist_hash = %s
ORDER BY 2 LIMIT 1
"""


def _update(
    memory: Memory,
    fields: dict[str, Any],
    warnings: list[str],
    source: ChangeSource,
    now: datetime,
    vectors: Vectors | None,
) -> dict[str, Any]:
    before = memory.tracked_state()
    for name, value in fields.items():
        setattr(memory, name, value)
    if "gist" in fields:
        memory.gist_autogenerated = False
    touch(memory, now)
    refresh_hashes(memory)
    memory.save()
    record_revisions([(memory, before)], source=source, action="update", now=now)
    # updated_at moved (and maybe salience or category): recall's entry always changes.
    reindex([memory], text_changed=bool(INDEXED_TEXT & fields.keys()), vectors=vectors)
    return _reply("updated", memory, warnings)


def _reply(action: str, memory: Memory, warnings: list[str]) -> dict[str, Any]:
    reply: dict[str, Any] = {
        "status": "ok",
        "action": action,
        "memory_id": str(memory.pk),
        "category": memory.category,
        "core": memory.core,
    }
    if warnings:
        reply["warnings"] = warnings
    return reply
