from collections.abc import Callable
from typing import Any

import pytest

from memories.models import Closing, Memory, MemoryTag, MemoryToken, Revision, Snapshot

COUNTED_MODELS = (Memory, Revision, MemoryToken, MemoryTag, Closing, Snapshot)


def embedded_cosine(query: str, memory: Any) -> int | None:
    """A memory's cosine with the query as SPEC §3.2 defines it, from vectors embedded here
    from the memory's text (never read from the store); None without an embedder."""
    from memories.conf import embedder
    from memories.semantic import cosines, memory_text, stored

    semantic = embedder()
    query_vector = semantic.embed([query])[0] if semantic is not None else None
    if semantic is None or query_vector is None:
        return None
    text = memory_text(
        gist=memory.gist, content=memory.content, tags=memory.tags, keywords=memory.search_keywords
    )
    vector = semantic.embed([text])[0]
    return cosines(query_vector, [stored(vector) if vector is not None else None])[0]


def row_counts() -> dict[str, int]:
    """How many rows every Taproot table holds: a refused call must leave these alone."""
    return {model.__name__: model.objects.count() for model in COUNTED_MODELS}


def memory_state(memory: Memory) -> dict[str, Any]:
    """Every stored column of a memory, re-read from the database."""
    fresh = Memory.objects.get(pk=memory.pk)
    return {f.attname: getattr(fresh, f.attname) for f in Memory._meta.concrete_fields}


@pytest.fixture
def unchanged() -> Callable[[], Any]:
    """`with unchanged():` asserts the block leaves every table's row count as it was."""
    from contextlib import contextmanager

    @contextmanager
    def guard():
        before = row_counts()
        yield
        assert row_counts() == before

    return guard


def forget_sqlite_statistics() -> None:
    """Drop SQLite's planner statistics, stored and loaded (they outlive a rolled-back
    test transaction in the connection), so queries plan as on a never-analysed store."""
    from django.db import connection

    if connection.vendor != "sqlite":
        return
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM sqlite_master WHERE name = 'sqlite_stat1'")
        if cursor.fetchone():
            cursor.execute("DELETE FROM sqlite_stat1")
            cursor.execute("ANALYZE sqlite_master")
