import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db.models import F

from bench.many_users import load, owner_copy, owner_names
from bench.synthetic import OWNER, generate_store
from memories.models import (
    Memory,
    MemoryTag,
    MemoryToken,
    MemoryVector,
    RecallEntry,
    RecallIndex,
    StoreCount,
)
from memories.models.counts import counted_rows, kept_counts

NOW = datetime(2026, 11, 29, 12, 0, 0, tzinfo=UTC)


def _store_of(owner: Any, to_template: dict[uuid.UUID, uuid.UUID]) -> dict[str, Any]:
    """Every row of an owner's store, its memories named by the template's ids."""

    def tid(pk: uuid.UUID) -> uuid.UUID:
        return to_template[pk]

    memories = {}
    for memory in Memory.objects.filter(owner=owner):
        values = {
            f.attname: getattr(memory, f.attname)
            for f in Memory._meta.concrete_fields
            if f.attname not in {"id", "owner_id", "id_prefix"}
        }
        values["linked_memories"] = [str(tid(uuid.UUID(i))) for i in memory.linked_memories]
        assert memory.id_prefix == memory.pk.hex[:8]
        memories[tid(memory.pk)] = values
    entry_fields = [
        f.attname for f in RecallEntry._meta.concrete_fields if f.attname not in {"id", "owner_id"}
    ]
    return {
        "memories": memories,
        "entries": {
            (tid(row[0]), *row[1:])
            for row in RecallEntry.objects.filter(owner=owner).values_list(*entry_fields)
        },
        "tokens": {
            (tid(memory_id), key, in_keywords)
            for memory_id, key, in_keywords in MemoryToken.objects.filter(owner=owner).values_list(
                "entry__memory_id", "key", "in_keywords"
            )
        },
        "tags": {
            (tid(memory_id), key)
            for memory_id, key in MemoryTag.objects.filter(owner=owner).values_list(
                "memory_id", "key"
            )
        },
        "vectors": {
            (tid(memory_id), embedder, dimension, bytes(vector), version)
            for memory_id, embedder, dimension, vector, version in MemoryVector.objects.filter(
                owner=owner
            ).values_list("memory_id", "embedder", "dimension", "vector", "version")
        },
        "index": RecallIndex.objects.filter(owner=owner).values_list(
            "profile", "live_memories", "version", "normalised"
        )[0],
        "counts": sorted(
            StoreCount.objects.filter(owner=owner, n__gt=0).values_list(
                "category", "core", "salience", "archived", "n"
            )
        ),
    }


@pytest.mark.django_db(transaction=True)
def test_owners_copied_in_sql_hold_what_the_bulk_loader_gave_the_first() -> None:
    template = generate_store(size=60, now=NOW, seed=5, other_users=0).of(OWNER)
    names = owner_names(4)
    messages: list[str] = []
    # Two batches of copies: the map table of the first is gone before the second.
    load(names, template, messages.append, batch=2)
    assert messages[0].startswith("loaded many-0001 in bulk")
    assert any(m.startswith("copied 3/3 owners") for m in messages)

    users = {u.username: u for u in get_user_model().objects.filter(username__in=names)}
    stores = {}
    for name in names:
        copy = owner_copy(template, name)
        # Each owner's memories have the ids the bulk loader would have given its copy.
        assert set(Memory.objects.filter(owner=users[name]).values_list("pk", flat=True)) == {
            m.id for m in copy
        }
        stores[name] = _store_of(
            users[name], {m.id: t.id for m, t in zip(copy, template, strict=True)}
        )

    first = stores[names[0]]
    assert len(first["memories"]) == len(template)
    assert first["tokens"] and first["tags"] and first["vectors"]
    assert any(values["linked_memories"] for values in first["memories"].values())
    for name in names[1:]:
        assert stores[name] == first, name

    # No id is shared: memories, ranking entries and the indexes' generations.
    assert Memory.objects.count() == len(names) * len(template)
    assert len(set(RecallEntry.objects.values_list("pk", flat=True))) == RecallEntry.objects.count()
    assert RecallEntry.objects.values("memory_id").distinct().count() == Memory.objects.count()
    assert len(set(RecallIndex.objects.values_list("generation", flat=True))) == len(names)
    # Every row points at its own owner's memory or entry (PostgreSQL copies without the
    # foreign keys' checks).
    assert not MemoryToken.objects.exclude(owner_id=F("entry__owner_id")).exists()
    memory_ids = set(Memory.objects.values_list("pk", flat=True))
    for model in (RecallEntry, MemoryTag, MemoryVector):
        assert set(model.objects.values_list("memory_id", flat=True)) <= memory_ids
        assert not model.objects.exclude(owner_id=F("memory__owner_id")).exists()
    # The counts the triggers kept are the rows' counts.
    owner_ids = [u.pk for u in users.values()]
    assert kept_counts(owner_ids) == counted_rows(owner_ids)
    assert sum(kept_counts(owner_ids).values()) == len(names) * len(template)

    # Loading again keeps what is there.
    messages.clear()
    load(names, template, messages.append)
    assert messages == []
    assert Memory.objects.count() == len(names) * len(template)


@pytest.mark.django_db(transaction=True)
def test_a_copy_refuses_a_map_that_misses_a_memory() -> None:
    from bench.loading import ensure_users, load_bulk
    from bench.owner_copies import copy_owner

    template = generate_store(size=20, now=NOW, seed=5, other_users=0).of(OWNER)
    users = ensure_users(owner_names(2))
    source = owner_copy(template, "many-0001")
    load_bulk(source, {"many-0001": users["many-0001"]})
    partial = {m.id: uuid.uuid4() for m in source[1:]}
    with pytest.raises(ValueError, match="every source memory"):
        copy_owner(users["many-0001"].pk, {users["many-0002"].pk: partial})
    same = dict.fromkeys((m.id for m in source), uuid.uuid4())
    with pytest.raises(ValueError, match="two memories one id"):
        copy_owner(users["many-0001"].pk, {users["many-0002"].pk: same})
    assert not Memory.objects.filter(owner=users["many-0002"]).exists()
