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
