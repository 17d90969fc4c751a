"""Simultaneous requests on real connections (threads): nothing fails, nothing is lost."""

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from django.db import connection

from mcp_bridge.handlers import promote, recall, remember
from memories.models import Memory
from tests.conftest import NOW, is_postgres

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
def test_recalls_of_overlapping_ids_in_either_order_neither_deadlock_nor_lose_a_count(
    user, make_memory
):
    """Strengthening takes the memories in id order, whatever order the ids were asked in
    (on PostgreSQL, one statement locks them: two recalls never wait on each other
    crosswise)."""
    memories = [make_memory(gist=f"Shared memory {n}") for n in range(4)]
    ids = [str(m.pk) for m in memories]

    def work(n: int) -> None:
        wanted = ids if n % 2 else list(reversed(ids))
        for _ in range(3):
            assert recall(owner=user, ids=wanted)["count"] == 4

    assert run_together(work, workers=12) == []
    for memory in memories:
        memory.refresh_from_db()
        assert memory.retrieval_count == 12 * 3
        assert memory.recall_entry.retrieval_count == 12 * 3


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


@contextmanager
def _imports_waiting(
    usernames: tuple[str, ...],
) -> Iterator[tuple[list[str], list[BaseException]]]:
    """Start one `import_taproot` of the original backup per username on PostgreSQL and
    hold each past its reads: a third connection holds the snapshot table (which import
    writes first) until the block ends. Yields their outputs and errors, complete once
    the block has ended."""
    from io import StringIO

    from django.core.management import call_command
    from django.db import transaction

    from tests.memories.test_import import FIXTURE

    locked, release = threading.Event(), threading.Event()
    outputs: list[str] = []
    errors: list[BaseException] = []

    def hold_snapshot_table() -> None:
        try:
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute("LOCK TABLE memories_snapshot IN EXCLUSIVE MODE")
                locked.set()
                release.wait(timeout=60)
        finally:
            connection.close()

    def run_import(username: str) -> None:
        try:
            out = StringIO()
            call_command("import_taproot", str(FIXTURE), "--user", username, stdout=out)
            outputs.append(out.getvalue())
        except BaseException as error:  # reported below, in the main thread
            errors.append(error)
        finally:
            connection.close()

    holder = threading.Thread(target=hold_snapshot_table)
    holder.start()
    assert locked.wait(timeout=30)
    importers = [threading.Thread(target=run_import, args=(name,)) for name in usernames]
    for thread in importers:
        thread.start()
    try:
        waiting = 0
        for _ in range(300):
            with connection.cursor() as cursor:
                # Only waits for this database's snapshot table: other test processes
                # share the server, and their waits must not count as ours.
                cursor.execute(
                    "SELECT count(*) FROM pg_locks WHERE NOT granted"
                    " AND relation = 'memories_snapshot'::regclass"
                    " AND database = (SELECT oid FROM pg_database"
                    " WHERE datname = current_database())"
                )
                waiting = cursor.fetchone()[0]
            if waiting == len(usernames):
                break
            time.sleep(0.05)
        assert waiting == len(usernames), "every import should be waiting"
        yield outputs, errors
    finally:
        release.set()
        holder.join(timeout=60)
        for thread in importers:
            thread.join(timeout=60)


def _import_twice_at_once(usernames: tuple[str, str]) -> tuple[list[str], list[BaseException]]:
    """Two imports at once, both past their reads before either writes."""
    with _imports_waiting(usernames) as (outputs, errors):
        pass
    return outputs, errors


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_second_import_into_an_account_while_one_runs_is_refused(user):
    if not is_postgres():
        pytest.skip(
            "needs PostgreSQL (DATABASE_URL=postgres://…): SQLite runs one writer at a time"
        )
    from io import StringIO

    from django.core.management import CommandError, call_command

    from tests.memories.test_import import FIXTURE

    # The first is past its reads, held before it writes: the second is refused at once,
    # not queued behind it.
    refused = pytest.raises(CommandError, match="An import into this account is still running")
    with _imports_waiting(("alice",)) as (outputs, errors), refused:
        call_command("import_taproot", str(FIXTURE), "--user", "alice", stdout=StringIO())

    assert errors == []
    assert outputs[0].splitlines()[0] == (
        "Imported 7 memories and 1 closing. The store as it was before is kept in a snapshot."
    )
    assert Memory.objects.filter(owner=user).count() == 7


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_two_imports_of_one_file_into_two_accounts_at_once_both_succeed(user, other_user):
    if not is_postgres():
        pytest.skip(
            "needs PostgreSQL (DATABASE_URL=postgres://…): SQLite runs one writer at a time"
        )

    outputs, errors = _import_twice_at_once(("alice", "bob"))

    assert errors == []
    assert [out.splitlines()[0].startswith("Imported 7 memories") for out in outputs] == [True] * 2
    # The one that met the other's ids tried again from the file: it gave them new ids and
    # normalised just as much.
    summaries = sorted(
        line for out in outputs for line in out.splitlines() if line.startswith("memories imported")
    )
    assert [line.split(", normalised")[0] for line in summaries] == [
        "memories imported: 7, skipped: 0, given new ids: 0",
        "memories imported: 7, skipped: 0, given new ids: 8",  # the closing too
    ]
    assert len({line.split(", normalised")[1] for line in summaries}) == 1
    assert Memory.objects.filter(owner=user).count() == 7
    assert Memory.objects.filter(owner=other_user).count() == 7


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_an_import_in_progress_does_not_hold_up_the_accounts_other_writes(user):
    """An import keeps other imports into the account out, nothing else: Claude's remember
    meanwhile is written at once, not after the whole import (nor deadlocked against it,
    which a lock on the account that other writes must wait for made possible)."""
    if not is_postgres():
        pytest.skip(
            "needs PostgreSQL (DATABASE_URL=postgres://…): SQLite runs one writer at a time"
        )
    remembered = threading.Event()
    errors: list[BaseException] = []

    def remember_meanwhile() -> None:
        try:
            remember(owner=user, category="episodic", content="Meanwhile.", gist="Meanwhile")
            remembered.set()
        except BaseException as error:  # reported below, in the main thread
            errors.append(error)
        finally:
            connection.close()

    # The import holds its account's lock and waits for the snapshot table.
    with _imports_waiting(("alice",)) as (_, import_errors):
        writer = threading.Thread(target=remember_meanwhile)
        writer.start()
        done_meanwhile = remembered.wait(timeout=10)
    writer.join(timeout=60)
    errors += import_errors
    assert errors == []
    assert done_meanwhile, "the remember waited for the import to finish"
    assert Memory.objects.filter(owner=user).count() == 7 + 1
