"""The one way a single memory is changed (SPEC §2): every service that edits one memory
(promote, a person's edits, archive, unarchive, restoring a revision, an update through
remember) hands its change to `change_memory`, which keeps the row, its revision and the
recall index in step."""

import copy
from collections.abc import Callable, Iterable
from datetime import datetime

from django.db import transaction

from memories.conf import embedder
from memories.models import ChangeSource, Memory, RevisionAction, User
from memories.recall.indexing import INDEXED_TEXT, Vectors, embedding_text, refresh_hashes, reindex
from memories.recall.indexing import vectors_for as embed
from memories.refs import MemoryRef
from memories.services._common import get_memory, record_revisions
from memories.shortids import resolve_memory_id

# The fields whose new value changes the hashes kept beside them.
_HASHED = frozenset({"gist", "content"})
_DERIVED_HASHES = ("gist_hash", "content_hash")


def embed_ahead(memories: Iterable[Memory]) -> Vectors | None:
    """The vectors these memories will have once written, computed before the write
    transaction: on SQLite that transaction holds the database's one write lock, which
    every other writer waits for while a model embeds. `reindex` takes them, and embeds
    again any memory whose text changed in between. None when recall does not use
    meaning. This only helps a service whose transaction is the outermost: the writes of
    remember, compress and `change_memory` say so with `atomic(durable=True)`, which
    refuses to run inside another transaction."""
    return embed(memories)


_CONCRETE = [f.attname for f in Memory._meta.concrete_fields if not f.generated]


def change_memory(
    owner: User,
    ref: MemoryRef,
    change: Callable[[Memory], None],
    *,
    source: ChangeSource,
    action: RevisionAction,
    now: datetime,
    rewrites_text: bool = False,
) -> Memory:
    """Change one memory of the owner's and keep everything that follows from it in step:
    lock the row, apply `change` (which may refuse with a DomainError), save exactly the
    fields that changed (and the hashes and last touch derived from them), record the
    revision, and bring the recall index up to date, its tokens and vector only when the
    text changed. Nothing changed, nothing written. Returns the memory as saved.

    `rewrites_text` says the change may rewrite the indexed text: the new text is then
    embedded first, from the memory as read without a lock (see embed_ahead).
    """
    pk = resolve_memory_id(owner, ref)
    ahead = None
    if rewrites_text and embedder() is not None:
        draft = get_memory(owner, pk)
        text = embedding_text(draft)
        change(draft)
        if embedding_text(draft) != text:
            ahead = embed_ahead([draft])
    with transaction.atomic(durable=True):
        memory = get_memory(owner, pk, for_update=True)
        values = {name: copy.deepcopy(getattr(memory, name)) for name in _CONCRETE}
        tracked = memory.tracked_state()
        change(memory)
        changed = {name for name in _CONCRETE if getattr(memory, name) != values[name]}
        if changed & _HASHED:
            refresh_hashes(memory)
            changed |= {name for name in _DERIVED_HASHES if getattr(memory, name) != values[name]}
        if changed:
            memory.save(update_fields=sorted(changed))
            record_revisions([(memory, tracked)], source=source, action=action, now=now)
            reindex([memory], text_changed=bool(changed & INDEXED_TEXT), vectors=ahead)
    return memory
