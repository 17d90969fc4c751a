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


# The shared fixtures set real passwords, and hashing one costs about half a second;
# these tests never log in, so their users carry no password.
@pytest.fixture
def user(django_user_model: Any) -> Any:
    return django_user_model.objects.create_user(username="alice")


@pytest.fixture
def other_user(django_user_model: Any) -> Any:
    return django_user_model.objects.create_user(username="bob")


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
