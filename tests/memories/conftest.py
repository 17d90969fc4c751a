from collections.abc import Callable
from typing import Any

import pytest

from memories.models import Closing, Memory, MemoryTag, MemoryToken, Revision, Snapshot

COUNTED_MODELS = (Memory, Revision, MemoryToken, MemoryTag, Closing, Snapshot)


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
