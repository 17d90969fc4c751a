import uuid
from datetime import UTC, datetime
from typing import Any

import pytest

from bench.loading import ensure_users, load_bulk, load_through_services
from bench.synthetic import generate_store
from memories.models import (
    Memory,
    MemoryTag,
    MemoryToken,
    MemoryVector,
    RecallEntry,
    RecallIndex,
    Revision,
)

NOW = datetime(2026, 11, 29, 12, 0, 0, tzinfo=UTC)


def _snapshot(owners: list[Any], to_generated: dict[uuid.UUID, uuid.UUID]) -> dict[str, Any]:
    """Every memory, token and tag row of these owners, keyed by generated id and name."""

    def gid(pk: uuid.UUID) -> uuid.UUID:
        return to_generated.get(pk, pk)

    memories = {}
    for memory in Memory.objects.filter(owner__in=owners):
        values = {
            f.attname: getattr(memory, f.attname)
            for f in Memory._meta.concrete_fields
            # The ids differ between the two paths, and so does what the database derives.
            if f.attname not in {"id", "owner_id", "id_prefix"}
        }
        values["owner"] = memory.owner.username.split("/")[-1]
        values["linked_memories"] = [str(gid(uuid.UUID(i))) for i in memory.linked_memories]
        memories[gid(memory.pk)] = values
    tokens = {
        (gid(memory_id), key, in_keywords)
        for memory_id, key, in_keywords in MemoryToken.objects.filter(owner__in=owners).values_list(
            "entry__memory_id", "key", "in_keywords"
        )
    }
    entries = {
        (gid(memory_id), *numbers)
        for memory_id, *numbers in RecallEntry.objects.filter(owner__in=owners).values_list(
            "memory_id",
            "category",
            "salience",
            "retrieval_count",
            "last_retrieved_us",
            "created_us",
            "updated_us",
        )
    }
    vectors = {
        (gid(memory_id), embedder, bytes(vector))
        for memory_id, embedder, vector in MemoryVector.objects.filter(
            owner__in=owners
        ).values_list("memory_id", "embedder", "vector")
    }
    live_counts = sorted(
        RecallIndex.objects.filter(owner__in=owners).values_list("profile", "live_memories")
    )
    tags = {
        (gid(memory_id), key)
        for memory_id, key in MemoryTag.objects.filter(owner__in=owners).values_list(
            "memory_id", "key"
        )
    }
    return {
        "memories": memories,
        "tokens": tokens,
        "tags": tags,
        "entries": entries,
        "vectors": vectors,
        "live_counts": live_counts,
    }


@pytest.mark.django_db
def test_bulk_path_writes_the_rows_the_services_write() -> None:
    store = generate_store(size=30, now=NOW, seed=11, other_users=1)
    names = [store.owner, *store.others]
    via_services = ensure_users(f"services/{name}" for name in names)
    in_bulk = ensure_users(f"bulk/{name}" for name in names)

    stored = load_through_services(
        store.memories, {name: via_services[f"services/{name}"] for name in names}
    )
    load_bulk(store.memories, {name: in_bulk[f"bulk/{name}"] for name in names})

    to_generated = {stored_id: generated for generated, stored_id in stored.items()}
    services_rows = _snapshot(list(via_services.values()), to_generated)
    bulk_rows = _snapshot(list(in_bulk.values()), {})
    assert len(services_rows["memories"]) == len(store.memories) == 30 + 10
    assert sum(m.retrieval_count for m in store.memories) > 0
    assert any(m.updated_at > m.created_at for m in store.memories)
    assert any(m.linked_memories for m in store.memories)
    assert services_rows["memories"] == bulk_rows["memories"]
    assert services_rows["tokens"] == bulk_rows["tokens"]
    assert services_rows["tags"] == bulk_rows["tags"]
    assert services_rows["entries"] == bulk_rows["entries"]
    assert services_rows["vectors"] == bulk_rows["vectors"]
    assert services_rows["vectors"]  # the embedder is on: every memory has one
    assert services_rows["live_counts"] == bulk_rows["live_counts"]
    # Both paths leave the id prefix short ids are looked up by to the database.
    assert all(m.id_prefix == m.pk.hex[:8] for m in Memory.objects.all())
    # Replaying an update with unchanged values leaves no revision behind.
    assert not Revision.objects.exists()
