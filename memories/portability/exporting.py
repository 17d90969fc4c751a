"""Export a user's store in the envelope of SPEC §7 (`taproot/1`).

The same envelope as the original Taproot's `/backup` endpoint, so one reader
(memories.services.importing) serves both. Revisions and snapshots are not exported.

An export is written piece by piece as it is read, in batches, so its memory does not
grow with the store; the text is byte for byte what `json.dumps` of the whole document
would give. Every batch reads the store as it was when the export began (one read-only
transaction), so the file is one moment's store and `total_keys` counts its entries.
One export per account runs at a time: a second one is refused while the first runs.

The one transaction is a `transaction.atomic()` block held open between batches (an
ExitStack carries it from the first batch to `close()`), so Django knows the export is in
a transaction and any atomic block inside it becomes a savepoint. It is rolled back at
the end: it only read. On PostgreSQL its first statement makes it REPEATABLE READ, READ
ONLY. On SQLite every atomic block begins as the settings' `transaction_mode` says, and
that is IMMEDIATE (taproot_site/env.py), which takes the write lock at BEGIN: an export
would hold it for as long as its download lasts, and every writer would wait, then fail
with "database is locked" after the 30-second busy timeout. So the export's block begins
DEFERRED (`_begun_deferred`): in WAL mode it reads one snapshot and blocks no writer.
tests/memories/test_export.py proves it
(test_an_export_holds_the_store_as_it_was_when_it_began: a writer deletes and adds
records mid-export, unblocked, and the text is the store as it began), and
test_the_streamed_export_is_byte_for_byte_the_whole_document holds the streamed text to
`json.dumps` of the whole document.
"""

import json
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import ExitStack, contextmanager
from datetime import datetime
from typing import Any, TypeVar

from asgiref.sync import sync_to_async
from django.core.cache import cache
from django.db import connection, models, transaction
from django.utils import timezone

from memories.errors import InvalidInput
from memories.models import Closing, Memory, User
from memories.timeutil import isoformat

EXPORT_FORMAT = "taproot/1"
MEMORY_PREFIX = "mem:"
CLOSING_PREFIX = "close:"
# Records read at once: a few megabytes at most, whatever the store's size.
EXPORT_BATCH = 200
# How long an export holds its account's turn. A finished or abandoned export gives it back
# at once; this bounds only an export whose process died. PostgreSQL also ends an export
# whose reader took nothing for this long, so a stalled download cannot hold a pooled
# connection for longer.
EXPORT_TURN_SECONDS = 10 * 60
EXPORT_BUSY = (
    "An export of this account is already running; one runs at a time. Wait for it to "
    "finish, then export again."
)
# Stands in for the entries while the envelope is written, to find where they go. JSON
# escapes its NUL characters, so nothing else in the envelope can look like it.
_ENTRIES_MARK = "\x00entries\x00"


class ExportBusy(InvalidInput):
    def __init__(self) -> None:
        super().__init__(EXPORT_BUSY)


def memory_value(memory: Memory) -> dict[str, Any]:
    """A memory as exported and snapshotted: every field of SPEC §2 except the owner."""
    return memory.as_record()


class Export:
    """One account's export as text, piece by piece: `pieces()` for a command, or as the
    content of a StreamingHttpResponse, which reads it with `async for` (each batch is
    read on the request's thread, between pieces) and calls `close()` at the end.

    Creating it takes the account's turn (ExportBusy when another export holds it);
    reading to the end or `close()` gives it back. `indent` is json.dumps's: None gives
    the compact form the dashboard serves, 1 the form export_taproot writes.
    """

    def __init__(
        self, *, owner: User, now: datetime | None = None, indent: int | None = None
    ) -> None:
        self.owner_id = owner.pk
        self.exported_at = isoformat(now if now is not None else timezone.now())
        self.encoder = json.JSONEncoder(
            ensure_ascii=False, indent=indent, separators=(",", ": ") if indent else (",", ":")
        )
        self.total_keys = 0
        self._turn: str | None = _take_turn(self.owner_id)
        self._snapshot: ExitStack | None = None
        self._batches: Iterator[list[dict[str, Any]]] | None = None

    def pieces(self) -> Iterator[str]:
        try:
            first = True
            while batch := self._next_batch():
                yield self._entries_text(batch, first=first)
                first = False
        finally:
            self.close()
        yield self._end_text(empty=first)

    async def __aiter__(self) -> AsyncIterator[str]:
        # (No __iter__: Django would take it and, under ASGI, read it whole first.)
        # Every batch is read through sync_to_async on the request's thread, so all of
        # them read in the same transaction. The turn is given back here once the last
        # batch is read; when the response ends early (the client went away), Django
        # calls close() on that thread instead.
        next_batch = sync_to_async(self._next_batch)
        first = True
        try:
            while batch := await next_batch():
                yield self._entries_text(batch, first=first)
                first = False
        except Exception:
            await sync_to_async(self.close)()
            raise
        await sync_to_async(self.close)()
        yield self._end_text(empty=first)

    def close(self) -> None:
        """End the read and give the account's turn back (once; later calls do nothing)."""
        if self._snapshot is not None:
            # Rolled back; a connection PostgreSQL dropped (a stalled export) is closed.
            snapshot, self._snapshot = self._snapshot, None
            snapshot.close()
        if self._turn is not None:
            _give_back_turn(self.owner_id, self._turn)
            self._turn = None

    # Writing: byte for byte what json.dumps of the whole document gives ----------------

    def _entries_text(self, batch: list[dict[str, Any]], *, first: bool) -> str:
        head, separator, _ = self._frame()
        # Entries sit two levels deep: their inner lines take the indentation that the
        # head ends with (none in the compact form).
        indent = "\n" + head.rpartition("\n")[2]
        text = separator.join(self.encoder.encode(entry).replace("\n", indent) for entry in batch)
        return (head if first else separator) + text

    def _end_text(self, *, empty: bool) -> str:
        if empty:
            return self.encoder.encode(self._envelope([]))
        return self._frame()[2]

    def _frame(self) -> list[str]:
        """The envelope's text before, between and after its entries."""
        envelope = self.encoder.encode(self._envelope([_ENTRIES_MARK, _ENTRIES_MARK]))
        return envelope.split(self.encoder.encode(_ENTRIES_MARK))

    def _envelope(self, entries: list[Any]) -> dict[str, Any]:
        return {
            "format": EXPORT_FORMAT,
            "exported_at": self.exported_at,
            "total_keys": self.total_keys,
            "entries": entries,
        }

    # Reading ---------------------------------------------------------------------------

    def _next_batch(self) -> list[dict[str, Any]]:
        """The next entries in export order (memories, then closings); [] at the end."""
        if self._batches is None:
            self._snapshot = _begin_snapshot()
            self.total_keys = (
                Memory.objects.filter(owner_id=self.owner_id).count()
                + Closing.objects.filter(owner_id=self.owner_id).count()
            )
            self._batches = self._read()
        return next(self._batches, [])

    def _read(self) -> Iterator[list[dict[str, Any]]]:
        for memories in _keyset_batches(Memory.objects.filter(owner_id=self.owner_id)):
            yield [_entry(MEMORY_PREFIX, m.pk, memory_value(m)) for m in memories]
        for closings in _keyset_batches(Closing.objects.filter(owner_id=self.owner_id)):
            yield [_entry(CLOSING_PREFIX, c.pk, c.as_record()) for c in closings]


def _entry(prefix: str, pk: uuid.UUID, value: dict[str, Any]) -> dict[str, Any]:
    return {"key": f"{prefix}{pk}", "value": value, "metadata": None}


Row = TypeVar("Row", Memory, Closing)


def _keyset_batches(queryset: "models.QuerySet[Row]") -> Iterator[list[Row]]:
    """The rows in (created_at, id) order, EXPORT_BATCH at a time, each batch one query
    that starts after the last row of the one before."""
    ordered = queryset.order_by("created_at", "id")
    batch = list(ordered[:EXPORT_BATCH])
    while batch:
        yield batch
        last = batch[-1]
        after = ordered.filter(created_at__gte=last.created_at).exclude(
            created_at=last.created_at, id__lte=last.pk
        )
        batch = list(after[:EXPORT_BATCH])


def export_store(*, owner: User, now: datetime | None = None) -> dict[str, Any]:
    """The whole export as one document (what the pieces of an Export parse to)."""
    document: dict[str, Any] = json.loads("".join(Export(owner=owner, now=now).pieces()))
    return document


# The account's turn ----------------------------------------------------------------------
# Kept in the database cache, which every worker shares; `add` writes a key only when it
# is absent (or expired), so of two exports starting at once exactly one gets the turn.


def _turn_key(owner_id: int) -> str:
    return f"taproot:export:{owner_id}"


def _take_turn(owner_id: int) -> str:
    turn = uuid.uuid4().hex
    if not cache.add(_turn_key(owner_id), turn, timeout=EXPORT_TURN_SECONDS):
        raise ExportBusy()
    return turn


def _give_back_turn(owner_id: int, turn: str) -> None:
    # Only our own: past its timeout, the turn may have gone to another export.
    if cache.get(_turn_key(owner_id)) == turn:
        cache.delete(_turn_key(owner_id))


# One moment's store ----------------------------------------------------------------------


def _begin_snapshot() -> ExitStack:
    """Enter an atomic block on this thread's connection, so every batch reads the store
    as it is now, and hand it over open: closing the stack rolls it back. Inside a
    caller's transaction it is a savepoint, and the caller's reads are the export's.
    """
    outermost = not connection.in_atomic_block
    with ExitStack() as stack:
        with _begun_deferred():
            stack.enter_context(transaction.atomic())
        # At the end it is rolled back: it only read.
        stack.callback(transaction.set_rollback, True)
        if outermost and connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                cursor.execute(
                    f"SET LOCAL idle_in_transaction_session_timeout = '{EXPORT_TURN_SECONDS}s'"
                )
        return stack.pop_all()


@contextmanager
def _begun_deferred() -> Iterator[None]:
    """On SQLite, an atomic block entered here begins DEFERRED, not IMMEDIATE as the
    settings say for every other transaction: it takes no lock until it reads, and then
    only a reader's (see the module's docstring). The connection's mode is read when a
    block begins, so it is changed for that moment only."""
    if connection.vendor != "sqlite" or connection.in_atomic_block:
        yield
        return
    connection.ensure_connection()
    sqlite: Any = connection  # the SQLite wrapper: its mode is not the base class's
    settings_mode = sqlite.transaction_mode
    sqlite.transaction_mode = "DEFERRED"
    try:
        yield
    finally:
        sqlite.transaction_mode = settings_mode
