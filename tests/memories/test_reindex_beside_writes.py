"""`reindex_taproot` beside live writes (issue 22): on PostgreSQL a rebuild locks each
batch's memories in id order before their index rows, as every write does, so the two
never wait on each other crosswise; a batch the database ends anyway (a deadlock, a
serialization failure) runs again. Every write lands, and the index is afterwards the
one a rebuild with nobody writing makes."""

import itertools
import threading
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from django.db import IntegrityError, OperationalError, connection
from psycopg.errors import DeadlockDetected, SerializationFailure

from memories.models import Memory, MemoryTag, MemoryToken, MemoryVector, RecallEntry, RecallIndex
from memories.recall import indexing
from memories.recall.indexing import ENTRY_FIELDS, rebuild, reindex
from memories.services import MemoryDraft, RecallFilters, archive, recall, remember, unarchive
from tests.conftest import NOW, is_postgres

STORE = 300
# Small, so that the rebuild is many transactions, each meeting the writers.
BATCH = 10
EDITED, TOGGLED, RECALLED = 10, 10, 5


def write_store(owner) -> list[Memory]:
    """STORE memories, indexed, with tags and a few words each."""
    memories = [
        Memory(
            id=uuid.uuid4(),
            owner=owner,
            category="episodic",
            content=f"Walked to the {('harbour', 'market', 'orchard')[i % 3]} on day {i}.",
            gist=f"Walk {i}",
            tags=[f"walk-{i % 7}"],
            created_at=NOW,
            updated_at=NOW,
            last_touched_at=NOW,
        )
        for i in range(STORE)
    ]
    for memory in memories:
        indexing.refresh_hashes(memory)
    Memory.objects.bulk_create(memories)
    reindex(memories, new=True)
    return sorted(memories, key=lambda m: m.pk)


def index_state(owner) -> dict[str, Any]:
    """Everything the rebuild writes, as plain values (no row ids, no versions)."""
    return {
        "entries": set(
            RecallEntry.objects.filter(owner=owner).values_list("memory_id", *ENTRY_FIELDS)
        ),
        "tokens": set(
            MemoryToken.objects.filter(owner=owner).values_list(
                "entry__memory_id", "key", "in_keywords"
            )
        ),
        "tags": set(MemoryTag.objects.filter(owner=owner).values_list("memory_id", "key")),
        "vectors": {
            (memory, embedder, bytes(vector))
            for memory, embedder, vector in MemoryVector.objects.filter(owner=owner).values_list(
                "memory_id", "embedder", "vector"
            )
        },
        "index": RecallIndex.objects.filter(owner=owner).values_list("profile", "live_memories")[0],
    }


def beside(main: Callable[[], None], writers: list[Callable[[], None]]) -> list[BaseException]:
    """Run `main` once while each writer runs over and over (at least once) until it is
    done; every error of every thread."""
    errors: list[BaseException] = []
    done = threading.Event()
    start = threading.Barrier(len(writers) + 1)

    def run(work: Callable[[], None], *, again: bool) -> None:
        try:
            start.wait(timeout=30)
            work()
            while again and not done.is_set():
                work()
        except BaseException as error:  # reported below, in the main thread
            errors.append(error)
        finally:
            if not again:
                done.set()
            connection.close()

    threads = [threading.Thread(target=run, args=(main,), kwargs={"again": False})]
    threads += [threading.Thread(target=run, args=(w,), kwargs={"again": True}) for w in writers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    return errors


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_reindex_beside_live_writes_fails_none_loses_none_and_leaves_the_index_current(user):
    if not is_postgres():
        pytest.skip(
            "needs PostgreSQL (DATABASE_URL=postgres://…): SQLite runs one writer at a time"
        )
    store = write_store(user)
    # Spread over the whole id range, so that every part of the rebuild meets writers.
    edited = store[3 :: STORE // EDITED][:EDITED]
    toggled = store[5 :: STORE // TOGGLED][:TOGGLED]
    recalled = store[7 :: STORE // RECALLED][:RECALLED]
    created: dict[uuid.UUID, str] = {}
    contents: dict[uuid.UUID, str] = {}
    archived: dict[uuid.UUID, bool] = {}
    recalls = 0
    edits = itertools.count()

    def create() -> None:
        content = f"Lantern number {len(created)} by the pier."
        made = remember(
            owner=user, draft=MemoryDraft(category="episodic", content=content, gist="Lantern")
        )
        created[made.memory.pk] = content

    def edit() -> None:
        for memory in edited:
            content = f"Edit {next(edits)}: kites over the {memory.pk.hex[:6]} dunes."
            remember(owner=user, draft=MemoryDraft(content=content), update=memory.pk)
            contents[memory.pk] = content

    def toggle() -> None:
        for memory in toggled:
            if archived.get(memory.pk):
                unarchive(owner=user, memory_id=memory.pk)
            else:
                archive(owner=user, memory_id=memory.pk, reason="toggled")
            archived[memory.pk] = not archived.get(memory.pk)

    def strengthen() -> None:
        nonlocal recalls
        found = recall(owner=user, filters=RecallFilters(ids=[m.pk for m in recalled]))
        assert len(found.hits) == RECALLED
        recalls += 1

    errors = beside(lambda: rebuild(user, batch_size=BATCH), [create, edit, toggle, strengthen])

    assert errors == []
    mine = Memory.objects.for_owner(user)
    assert dict(mine.filter(pk__in=created).values_list("pk", "content")) == created
    assert dict(mine.filter(pk__in=contents).values_list("pk", "content")) == contents
    assert {m.pk: m.is_archived for m in mine.filter(pk__in=archived)} == archived
    assert set(mine.filter(pk__in=[m.pk for m in recalled]).values_list("retrieval_count")) == {
        (recalls,)
    }
    live = set(mine.live().values_list("pk", flat=True))
    assert len(live) == STORE + len(created) - sum(archived.values())
    beside_writes = index_state(user)
    assert {entry[0] for entry in beside_writes["entries"]} == live
    assert beside_writes["index"][1] == len(live)
    rebuild(user)
    assert index_state(user) == beside_writes


def deadlocked() -> OperationalError:
    error = OperationalError("deadlock detected")
    error.__cause__ = DeadlockDetected("deadlock detected")
    return error


@pytest.fixture
def no_pause(monkeypatch):
    monkeypatch.setattr(indexing.time, "sleep", lambda seconds: None)


@pytest.mark.django_db
@pytest.mark.usefixtures("no_pause")
def test_a_batch_ended_by_a_deadlock_runs_again():
    calls = []

    def batch() -> str:
        calls.append(1)
        if len(calls) == 1:
            raise deadlocked()
        return "written"

    assert indexing.atomic_retrying(batch) == "written"
    assert len(calls) == 2


@pytest.mark.django_db
@pytest.mark.usefixtures("no_pause")
def test_a_batch_ended_by_a_serialization_failure_runs_again():
    calls = []

    def batch() -> None:
        calls.append(1)
        if len(calls) < 3:
            raise OperationalError("could not serialize") from SerializationFailure("40001")

    indexing.atomic_retrying(batch)
    assert len(calls) == 3


@pytest.mark.django_db
@pytest.mark.usefixtures("no_pause")
def test_a_batch_that_keeps_deadlocking_gives_up_with_the_error():
    calls = []

    def batch() -> None:
        calls.append(1)
        raise deadlocked()

    with pytest.raises(OperationalError, match="deadlock"):
        indexing.atomic_retrying(batch)
    assert len(calls) == indexing.BATCH_ATTEMPTS


@pytest.mark.django_db
@pytest.mark.usefixtures("no_pause")
@pytest.mark.parametrize(
    "error", [IntegrityError("duplicate key"), OperationalError("server closed the connection")]
)
def test_any_other_error_of_a_batch_surfaces_at_once(error):
    calls = []

    def batch() -> None:
        calls.append(1)
        raise error

    with pytest.raises(type(error)):
        indexing.atomic_retrying(batch)
    assert len(calls) == 1
