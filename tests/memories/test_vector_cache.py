"""Each worker's cache of owners' vectors (issue 32): a budget it keeps to by letting the
least recently served owners go, a lock per owner, and the database read under none."""

import threading
import time
import uuid

import pytest
from django.db import connection

from mcp_bridge.handlers import remember
from memories.conf import embedder
from memories.models import MemoryVector
from memories.recall.embedding import to_bytes
from memories.recall.owner_index import statistics
from memories.recall.semantic import OwnerVectors
from memories.recall.vector_cache import VectorCache

pytestmark = pytest.mark.django_db


@pytest.fixture
def semantic():
    found = embedder()
    assert found is not None
    return found


@pytest.fixture
def owners(django_user_model, semantic):
    """Three owners with a few memories each, written through the service."""
    made = []
    for name in ("ana", "ben", "cai"):
        owner = django_user_model.objects.create_user(username=name, password="pw")
        for n in range(3):
            remember(
                owner=owner,
                category="episodic",
                gist=f"{name} note {n}",
                content=f"{name} grows beans {n}.",
            )
        made.append(owner)
    return made


def warm(cache, owner, semantic):
    query = semantic.embed(["beans"])[0]
    return cache.ceiling(owner.pk, query, embedder=semantic, index=statistics(owner.pk, []))


def one_owner_bytes(owners, semantic):
    probe = VectorCache(budget=1 << 30)
    warm(probe, owners[0], semantic)
    return probe.held_bytes()


def test_past_its_budget_the_cache_lets_the_least_recently_served_owner_go(owners, semantic):
    ana, ben, cai = owners
    size = one_owner_bytes(owners, semantic)
    cache = VectorCache(budget=2 * size + size // 2)  # room for two owners
    first = {owner.pk: warm(cache, owner, semantic) for owner in (ana, ben)}
    warm(cache, ana, semantic)  # ana served again: ben is now the one served longest ago
    warm(cache, cai, semantic)

    assert [cache.holds(o.pk) for o in (ana, ben, cai)] == [True, False, True]
    assert cache.held_bytes() <= cache.budget
    # Let go is not lost: ben's vectors are read again, the same answer.
    assert warm(cache, ben, semantic) == first[ben.pk]
    assert not cache.holds(ana.pk)


def test_an_owner_alone_past_the_budget_is_answered_but_not_kept(owners, semantic):
    ana = owners[0]
    roomy, tight = VectorCache(budget=1 << 30), VectorCache(budget=1)
    assert warm(tight, ana, semantic) == warm(roomy, ana, semantic)
    assert not tight.holds(ana.pk)
    assert tight.held_bytes() == 0


def test_the_database_is_read_under_no_lock(owners, semantic):
    ana, ben, _ = owners
    cache = VectorCache(budget=1 << 30)
    warm(cache, ben, semantic)
    seen = []

    def note_locks(execute, sql, params, many, context):
        if MemoryVector._meta.db_table in sql:
            held = list(cache._owners.values())
            seen.append((cache._table.locked(), any(h.lock.locked() for h in held)))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(note_locks):
        warm(cache, ana, semantic)
    assert seen == [(False, False)]


def test_one_owners_rows_in_use_keep_no_other_owner_waiting(owners, semantic):
    ana, ben, _ = owners
    cache = VectorCache(budget=1 << 30)
    warm(cache, ana, semantic)
    expected = warm(cache, ben, semantic)
    answered = []
    query = semantic.embed(["beans"])[0]
    index = statistics(ben.pk, [])

    with cache._owners[ana.pk].lock:  # ana's rows busy (a long scan, a refresh)
        other = threading.Thread(
            target=lambda: answered.append(
                cache.ceiling(ben.pk, query, embedder=semantic, index=index)
            )
        )
        other.start()
        other.join(timeout=10)
    assert answered == [expected]


def test_of_two_loads_at_once_the_newer_is_kept(owners, semantic):
    """Two recalls of one owner load its vectors at once (the database read takes no
    lock); whichever finishes last, the cache keeps the one of the later version."""
    ana = owners[0]
    index = statistics(ana.pk, [])
    memory = uuid.uuid4()

    def loaded(text, version):
        held = OwnerVectors(semantic.name, semantic.dimension, index.generation)
        held.apply([(memory, to_bytes(semantic.embed([text])[0]))])
        held.version = version
        return held

    newer, older = loaded("beans, as written now", 7), loaded("beans, as written before", 6)
    for first, second in ((newer, older), (older, newer)):
        cache = VectorCache(budget=1 << 30)
        cache._keep(ana.pk, first)
        cache._keep(ana.pk, second)
        assert cache._owners[ana.pk] is newer


def test_recalls_of_one_owner_at_once_read_its_vectors_once_and_keep_no_other_waiting(
    owners, semantic, monkeypatch
):
    from memories.recall import vector_cache as module

    ana, ben, _ = owners
    query = semantic.embed(["beans"])[0]
    indexes = {o.pk: statistics(o.pk, []) for o in (ana, ben)}
    rows = {o.pk: list(module._rows_since(o.pk, semantic, -1)) for o in (ana, ben)}
    expected = {o.pk: warm(VectorCache(budget=1 << 30), o, semantic) for o in (ana, ben)}
    reads = []
    ana_reading, ana_may_finish = threading.Event(), threading.Event()

    def rows_since(owner_id, embedder, version):
        reads.append(owner_id)
        if owner_id == ana.pk:
            ana_reading.set()
            assert ana_may_finish.wait(timeout=10)
        return rows[owner_id]

    monkeypatch.setattr(module, "_rows_since", rows_since)
    cache = VectorCache(budget=1 << 30)
    answered = {}

    def recall(name, owner):
        answered[name] = cache.ceiling(owner.pk, query, embedder=semantic, index=indexes[owner.pk])

    first = threading.Thread(target=recall, args=("ana 1", ana))
    first.start()
    assert ana_reading.wait(timeout=10)
    second = threading.Thread(target=recall, args=("ana 2", ana))
    second.start()
    recall("ben", ben)  # ana's load under way keeps ben waiting for nothing
    time.sleep(0.2)  # time for the second recall of ana to reach its read, were it to
    ana_may_finish.set()
    first.join(timeout=10)
    second.join(timeout=10)

    assert answered == {
        "ana 1": expected[ana.pk],
        "ana 2": expected[ana.pk],
        "ben": expected[ben.pk],
    }
    assert sorted(reads) == sorted([ana.pk, ben.pk])
    assert cache._loading == {}


def _whole_reads(monkeypatch) -> list[int]:
    """The owners whose vectors the cache reads whole from now on."""
    from memories.recall import vector_cache as module

    reads: list[int] = []
    rows_since = module._rows_since

    def counted(owner_id, embedder, version):
        if version < 0:
            reads.append(owner_id)
        return rows_since(owner_id, embedder, version)

    monkeypatch.setattr(module, "_rows_since", counted)
    return reads


def test_a_recall_that_read_the_index_before_a_write_is_served_the_newer_vectors(
    owners, semantic, monkeypatch
):
    """Two recalls of one owner in a worker, a remember between their reads of the index:
    the later one takes the new vector in, and the earlier one, whose index is now older
    than the cache, is answered from it rather than by reading every vector again (which
    took seconds at 100,000 memories, again and again under writes)."""
    ana = owners[0]
    query = semantic.embed(["beans"])[0]
    cache = VectorCache(budget=1 << 30)
    warm(cache, ana, semantic)
    earlier = statistics(ana.pk, [])
    remember(owner=ana, category="episodic", gist="beans", content="Beans and more beans.")
    later = statistics(ana.pk, [])
    assert later.version > earlier.version
    newest = cache.ceiling(ana.pk, query, embedder=semantic, index=later)
    held = cache._owners[ana.pk]
    reads = _whole_reads(monkeypatch)

    assert cache.ceiling(ana.pk, query, embedder=semantic, index=earlier) == newest
    assert reads == []
    assert cache._owners[ana.pk] is held


def test_a_database_restored_under_the_server_is_read_whole_again(owners, semantic, monkeypatch):
    """A database put back by hand keeps its generation, and its version goes back below
    the one a worker holds: the cache is of another store and is read again."""
    from memories.models import RecallIndex

    ana = owners[0]
    query = semantic.embed(["beans"])[0]
    cache = VectorCache(budget=1 << 30)
    before = statistics(ana.pk, [])
    remember(owner=ana, category="episodic", gist="beans", content="Beans and more beans.")
    warm(cache, ana, semantic)
    RecallIndex.objects.filter(owner=ana).update(version=before.version)  # as restored
    MemoryVector.objects.filter(owner=ana, version__gt=before.version).delete()
    reads = _whole_reads(monkeypatch)

    restored = statistics(ana.pk, [])
    answer = cache.ceiling(ana.pk, query, embedder=semantic, index=restored)

    assert reads == [ana.pk]
    assert cache._owners[ana.pk].version == before.version
    assert answer == warm(VectorCache(budget=1 << 30), ana, semantic)
