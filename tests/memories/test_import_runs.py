"""An import writes in committed batches and still counts as one change: its snapshot holds
what it can change (the records it created, the ones it normalised as they were), undoes a
failed import, is undone at the next start when its process died, and restores the store
to before. One import per account at a time, a few per worker; the newest snapshots kept.
"""

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from django.db import OperationalError

from mcp_bridge.database import LOCKED_MESSAGE, busy_message
from memories.errors import ImportBusy, ImportRunning
from memories.models import Closing, Memory, Revision, Snapshot, SnapshotRecord
from memories.services import import_store, restore_snapshot
from memories.services import importing as importing_module
from memories.services.import_runs import import_slot, is_alive, recover_interrupted_imports
from memories.services.snapshots import KEEP_SNAPSHOTS
from tests import live_server
from tests.conftest import NOW
from tests.live_server import ROOT, run_server

pytestmark = pytest.mark.django_db(transaction=True)


def plain_list(count: int, word: str = "note") -> bytes:
    return "".join(f"- The {word} number {n} about tide tables\n" for n in range(count)).encode()


def records(owner) -> dict[str, list]:
    """The owner's memories and closings, every column: what an import may change."""
    return {
        "memories": list(Memory.objects.filter(owner=owner).order_by("pk").values()),
        "closings": list(Closing.objects.filter(owner=owner).order_by("pk").values()),
    }


def test_the_snapshot_holds_what_the_import_created_and_what_it_normalised(user, make_memory):
    untouched = make_memory(content="Left alone.")
    drifted = make_memory(category="event", salience="3", content="Drifted.")

    reply = import_store(owner=user, data=plain_list(3), now=NOW)

    snapshot = Snapshot.objects.get(pk=reply.snapshot_id)
    assert (snapshot.reason, snapshot.in_progress) == ("before-import", False)
    rows = SnapshotRecord.objects.filter(snapshot=snapshot)
    created = set(rows.filter(kind="created_memory").values_list("record_id", flat=True))
    new = set(Memory.objects.filter(owner=user).values_list("pk", flat=True))
    assert created == new - {untouched.pk, drifted.pk}
    (kept,) = rows.filter(kind="memory")
    assert (kept.record_id, kept.value["category"], kept.value["salience"]) == (
        drifted.pk,
        "event",
        "3",
    )
    assert "3 memories" not in snapshot.reason  # what it holds is in rows, not in records


def test_restoring_the_import_snapshot_returns_the_store_to_before(user, make_memory):
    make_memory(content="Left alone.")
    make_memory(category="event", salience="3", content="Drifted.")
    Closing.objects.create(owner=user, reflection="Earlier.", created_at=NOW)
    before = records(user)
    reply = import_store(owner=user, data=plain_list(700), now=NOW)

    restored = restore_snapshot(snapshot_id=reply.snapshot_id, owner=user, now=NOW)

    assert (restored.removed, restored.restored) == (700, 1)
    after = records(user)
    assert _without_bookkeeping(after["memories"]) == _without_bookkeeping(before["memories"])
    assert after["closings"] == before["closings"]
    # The restore is undone by its own snapshot: the import's records come back.
    again = restore_snapshot(snapshot_id=restored.before_restore.pk, owner=user, now=NOW)
    assert again.recreated == 700
    assert Memory.objects.filter(owner=user).count() == 702


def _without_bookkeeping(rows: list[dict]) -> list[dict]:
    """A restore writes the values back and a revision beside them; compare the values."""
    return [{k: v for k, v in row.items() if k not in ("last_touched_at",)} for row in rows]


def test_an_import_that_fails_half_way_undoes_its_committed_batches(user, make_memory, monkeypatch):
    make_memory(content="Left alone.")
    make_memory(category="event", salience="3", content="Drifted.")
    before = records(user)
    real = importing_module._write_batch
    batches: list[int] = []

    def failing_third(*args, **kwargs):
        batches.append(1)
        if len(batches) == 3:
            raise RuntimeError("the disk is full")
        return real(*args, **kwargs)

    monkeypatch.setattr(importing_module, "_write_batch", failing_third)

    with pytest.raises(RuntimeError):
        import_store(owner=user, data=plain_list(1500), now=NOW)

    assert len(batches) == 3  # two batches were committed before it failed
    assert _without_bookkeeping(records(user)["memories"]) == _without_bookkeeping(
        before["memories"]
    )
    assert not Snapshot.objects.filter(owner=user).exists()
    assert not SnapshotRecord.objects.exists()


def test_an_account_keeps_its_newest_snapshots(user):
    for n in range(KEEP_SNAPSHOTS + 2):
        import_store(owner=user, data=plain_list(1, word=f"w{n}"), now=NOW)

    assert Snapshot.objects.filter(owner=user).count() == KEEP_SNAPSHOTS
    kept_rows = set(SnapshotRecord.objects.values_list("snapshot_id", flat=True))
    assert kept_rows <= set(Snapshot.objects.values_list("pk", flat=True))


@pytest.mark.parametrize("dry_run", [False, True])
def test_one_import_or_dry_run_per_account_at_a_time(user, other_user, dry_run):
    with import_slot(user.pk):
        with pytest.raises(ImportRunning, match="still running"):
            import_store(owner=user, data=plain_list(1), now=NOW, dry_run=dry_run)
        # Another account's import goes ahead meanwhile.
        assert import_store(owner=other_user, data=plain_list(1), now=NOW).memories == 1
    assert import_store(owner=user, data=plain_list(1), now=NOW, dry_run=dry_run).memories == 1


def test_a_worker_runs_a_bounded_number_of_imports_at_once(user, other_user, settings):
    settings.TAPROOT_IMPORTS_PER_WORKER = 1
    with import_slot(user.pk), pytest.raises(ImportBusy, match="busy with other imports"):
        import_store(owner=other_user, data=plain_list(1), now=NOW, dry_run=True)
    assert import_store(owner=other_user, data=plain_list(1), now=NOW).memories == 1


def test_a_lock_not_granted_in_time_reads_as_busy_not_as_a_failure():
    assert busy_message(OperationalError("database is locked")) == LOCKED_MESSAGE
    assert busy_message(OperationalError("no such table: x")) is None
    assert "Try again" in LOCKED_MESSAGE


# A process killed in the middle of an import ------------------------------------------


# Records enough for twenty batches: the import checks them all before it writes the first
# (about a third of a millisecond each), so the tests wait that long for it to start, and
# then stop it or write beside it while eighteen batches (seconds) are still to come.
IMPORT_IN_FLIGHT = 10_000


def start_import(tmp_path: Path, owner, count: int) -> subprocess.Popen[bytes]:
    path = tmp_path / "notes.md"
    path.write_bytes(plain_list(count, word="imported"))
    env = {
        **os.environ,
        "DATABASE_URL": live_server.test_database_url(),
        "TAPROOT_EMBEDDER": "none",
    }
    return subprocess.Popen(
        [sys.executable, "manage.py", "import_taproot", str(path), "--user", owner.username],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def wait_for_batches(owner, process: subprocess.Popen[bytes], at_least: int) -> Snapshot:
    """The import's snapshot once it has committed `at_least` batches' records."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        run = Snapshot.objects.filter(owner=owner, in_progress=True).first()
        if run is not None:
            written = SnapshotRecord.objects.filter(snapshot=run, kind="created_memory").count()
            if written >= at_least * 500:
                return run
        assert process.poll() is None, "the import ended before it could be stopped"
        time.sleep(0.05)
    raise AssertionError("the import never got going")


@pytest.mark.server
def test_an_import_killed_half_way_is_undone_at_the_next_start(user, make_memory, tmp_path):
    make_memory(content="Left alone.")
    before = records(user)
    process = start_import(tmp_path, user, IMPORT_IN_FLIGHT)
    try:
        run = wait_for_batches(user, process, at_least=2)
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
    finally:
        if process.poll() is None:
            process.kill()
    assert Memory.objects.filter(owner=user).count() > 1  # half-written, for now
    assert not is_alive(run.worker, run.heartbeat_at, run.created_at)

    # The next start: the server undoes it before it serves.
    with run_server(tmp_dir=tmp_path, env={"TAPROOT_EMBEDDER": "none"}):
        pass

    assert _without_bookkeeping(records(user)["memories"]) == _without_bookkeeping(
        before["memories"]
    )
    assert not Snapshot.objects.filter(owner=user).exists()
    assert not Revision.objects.filter(memory__owner=user).exclude(action="import").exists()


@pytest.mark.server
def test_other_accounts_write_while_an_import_is_half_way(user, other_user, tmp_path):
    from memories.models import Category
    from memories.services import MemoryDraft, remember

    process = start_import(tmp_path, user, IMPORT_IN_FLIGHT)
    try:
        wait_for_batches(user, process, at_least=1)
        done = threading.Event()

        def write() -> None:
            remember(
                owner=other_user,
                draft=MemoryDraft(category=Category.EPISODIC, content="Tide at six.", gist="Tide"),
            )
            done.set()

        writer = threading.Thread(target=write)
        writer.start()
        writer.join(timeout=60)
        assert done.is_set()
        # Written while the import was still going: it did not wait for the whole of it.
        assert Snapshot.objects.filter(owner=user, in_progress=True).exists()
    finally:
        process.kill()
        process.wait()
        recover_interrupted_imports()
    assert Memory.objects.filter(owner=other_user).count() == 1


def test_the_dashboard_answers_a_lock_not_granted_in_time_with_503_busy(rf):
    from taproot_site.busy import PoolTimeoutMiddleware

    middleware = PoolTimeoutMiddleware(lambda request: None)  # type: ignore[arg-type, return-value]
    response = middleware.process_exception(
        rf.get("/dashboard/"), OperationalError("database is locked")
    )

    assert response is not None
    assert (response.status_code, response["Retry-After"]) == (503, "5")
    assert response.content.decode() == LOCKED_MESSAGE


def test_a_store_found_normalised_is_not_read_whole_again_until_a_restore(
    user, make_memory, monkeypatch
):
    from memories.models import RecallIndex
    from memories.services import normalise as normalise_module

    make_memory(category="event", salience="3", content="Drifted.")
    first = import_store(owner=user, data=plain_list(1, word="a"), now=NOW)
    assert (first.normalised_existing, RecallIndex.objects.get(owner=user).normalised) == (1, True)
    surveys: list[int] = []
    real = normalise_module.survey
    monkeypatch.setattr(
        normalise_module, "survey", lambda owner_id: surveys.append(owner_id) or real(owner_id)
    )

    import_store(owner=user, data=plain_list(1, word="b"), now=NOW)
    assert surveys == []  # known normalised: the store is not read whole
    # Restoring the first import's snapshot writes the drifted record back.
    restore_snapshot(snapshot_id=first.snapshot_id, owner=user, now=NOW)
    assert not RecallIndex.objects.get(owner=user).normalised
    again = import_store(owner=user, data=plain_list(1, word="c"), now=NOW)

    assert surveys == [user.pk]
    assert again.normalised_existing == 1
