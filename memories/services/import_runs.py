"""Who may import now, and what an import that stopped half-way leaves behind.

An import writes in committed batches, so that on SQLite other accounts' writes go
through between them (the database has one write lock). The account still sees it whole
or not at all: before its first batch the import starts its snapshot, in progress, and
each batch adds the ids of the records it created to it in the same transaction. An
import that fails undoes itself from that snapshot; one whose process died (kill -9, a
crash, a power cut) is undone by `recover_interrupted_imports`, which the server runs at
start and every import runs for its account first. A process is known dead when it ran
on this machine since its last boot and is gone; on another machine, when its import has
not written a batch for STALE_AFTER.

One import or dry run per account runs at a time, across the server's workers (a lease
in the shared cache), and at most TAPROOT_IMPORTS_PER_WORKER in one worker: a file is
read whole twice and its records checked, which takes memory and a core for a while.
"""

import os
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from datetime import datetime, timedelta
from functools import cache
from pathlib import Path

from django.conf import settings
from django.core.cache import cache as shared_cache
from django.db import transaction
from django.utils import timezone

from memories.errors import ImportBusy, ImportRunning
from memories.models import Snapshot
from memories.services.snapshot_restore import undo_rows
from memories.services.snapshots import start_snapshot

# An import on another machine that has written no batch for this long is taken to be
# dead (a batch of 500 records takes well under a second to write).
STALE_AFTER = timedelta(minutes=10)
# How long an account's import lease lasts at most, should its process die without giving
# it back (a lease of a process known dead on this machine is taken over at once).
LEASE_SECONDS = 6 * 3600

_running = threading.Lock()
_in_this_worker = 0


@cache
def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def _started(pid: int) -> str:
    """When the process started (clock ticks since boot), or "" when there is none."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return ""
    return fields[19] if len(fields) > 19 else ""


def this_worker() -> str:
    pid = os.getpid()
    return f"{socket.gethostname()} {_boot_id()} {pid} {_started(pid)}"


def is_alive(worker: str, heartbeat_at: datetime | None, now: datetime) -> bool:
    """Whether the process `worker` names may still be running."""
    parts = worker.split(" ")
    if len(parts) == 4 and _boot_id() and parts[:2] == [socket.gethostname(), _boot_id()]:
        pid, started = parts[2], parts[3]
        return pid.isdigit() and _started(int(pid)) == started
    return heartbeat_at is not None and now - heartbeat_at < STALE_AFTER


@contextmanager
def import_slot(owner_id: int) -> Iterator[None]:
    """Hold the account's one import (or dry run) and one of this worker's places for
    the block; ImportRunning or ImportBusy when either is taken."""
    global _in_this_worker
    with _running:
        if _in_this_worker >= settings.TAPROOT_IMPORTS_PER_WORKER:
            raise ImportBusy()
        _in_this_worker += 1
    try:
        with _account_lease(owner_id):
            yield
    finally:
        with _running:
            _in_this_worker -= 1


@contextmanager
def _account_lease(owner_id: int) -> Iterator[None]:
    key = f"taproot:import:{owner_id}"
    me = this_worker()
    if not shared_cache.add(key, me, LEASE_SECONDS):
        holder = shared_cache.get(key)
        if isinstance(holder, str) and holder != me and is_alive(holder, None, timezone.now()):
            raise ImportRunning()
        if holder == me:
            raise ImportRunning()  # another thread of this process
        shared_cache.set(key, me, LEASE_SECONDS)  # its process is gone: taken over
    try:
        yield
    finally:
        with suppress(Exception):  # the lease expires by itself anyway
            if shared_cache.get(key) == me:
                shared_cache.delete(key)


def begin_import(owner_id: int, now: datetime) -> Snapshot:
    """The import's snapshot, in progress; ImportRunning when the account has one (an
    import of another worker that got past the lease's time)."""
    recover_interrupted_imports(owner_id=owner_id)
    with transaction.atomic():
        if Snapshot.objects.filter(owner_id=owner_id, in_progress=True).exists():
            raise ImportRunning()
        return start_snapshot(
            owner_id=owner_id,
            reason="before-import",
            now=now,
            in_progress=True,
            worker=this_worker(),
        )


def heartbeat(run: Snapshot) -> None:
    """Note, inside a batch's transaction, that the import is still writing."""
    Snapshot.objects.filter(pk=run.pk).update(heartbeat_at=timezone.now())


def finish_import(run: Snapshot) -> None:
    """The import wrote its last batch: its snapshot is complete."""
    Snapshot.objects.filter(pk=run.pk).update(in_progress=False, worker="", heartbeat_at=None)


def abandon_import(run: Snapshot, now: datetime) -> None:
    """Undo what the import wrote, a batch at a time, then forget its snapshot."""
    undo_rows(run, now=now, safety=None, batched=True)
    Snapshot.objects.filter(pk=run.pk).delete()


def recover_interrupted_imports(*, owner_id: int | None = None) -> int:
    """Undo every import (of one account, or of all) left in progress by a process that
    is gone; how many."""
    now = timezone.now()
    runs = Snapshot.objects.filter(in_progress=True)
    if owner_id is not None:
        runs = runs.filter(owner_id=owner_id)
    undone = 0
    for run in runs.order_by("pk"):
        if not is_alive(run.worker, run.heartbeat_at, now):
            abandon_import(run, now)
            undone += 1
    return undone
