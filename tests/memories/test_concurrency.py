"""Simultaneous requests on real connections (threads): nothing fails, nothing is lost."""

import threading

import pytest
from django.db import connection

from memories.models import Memory
from memories.services import promote, recall, remember
from tests.conftest import NOW

WORKERS = 12


def run_together(work, workers: int = WORKERS) -> list[BaseException]:
    start = threading.Barrier(workers)
    errors: list[BaseException] = []

    def worker(n: int) -> None:
        try:
            start.wait(timeout=30)
            work(n)
        except BaseException as error:  # reported below, in the main thread
            errors.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    return errors


@pytest.mark.django_db(transaction=True)
def test_concurrent_recalls_lose_no_increment(user, make_memory):
    memory = make_memory(gist="Shared memory", retrieval_count=5, last_retrieved=NOW)

    def work(n: int) -> None:
        assert recall(owner=user, ids=[str(memory.pk)], query="shared")["count"] == 1

    assert run_together(work, workers=20) == []
    memory.refresh_from_db()
    assert memory.retrieval_count == 5 + 20
    assert memory.updated_at == NOW
    assert memory.last_retrieved is not None and memory.last_retrieved != NOW


@pytest.mark.django_db(transaction=True)
def test_simultaneous_writes_and_recalls_all_succeed(user, make_memory):
    shared = make_memory(gist="Shared garden memory")

    def work(n: int) -> None:
        remember(owner=user, category="episodic", content=f"Note {n}", gist=f"Garden note {n}")
        promote(owner=user, memory_id=shared.pk, salience=("high", "low")[n % 2])
        recall(owner=user, ids=[str(shared.pk)])
        remember(
            owner=user,
            update_id=shared.pk,
            category="episodic",
            content=f"Shared garden memory, edit {n}",
        )

    assert run_together(work) == []
    assert Memory.objects.filter(owner=user).count() == WORKERS + 1
    shared.refresh_from_db()
    assert shared.retrieval_count == WORKERS
    assert shared.revisions.count() >= WORKERS  # every content edit kept its revision
    found = recall(owner=user, query="garden", limit=50)
    assert found["count"] == WORKERS + 1
