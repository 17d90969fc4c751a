"""The calls and refusals the clients page shows (oauth.activity), gathered off every
request's path: a request only notes what happened in memory, and a task of the serving
process writes what was noted once a second, in one transaction, on a database thread.

Every tools/call passes through `CallNoting` (an MCP middleware, beside the request log),
so a call is noted with its outcome as Claude read it: an error is a reply marked as one,
whether a tool refused (an unknown id) or the SDK did (an unknown tool, arguments that
fail its validation).

A note costs a request no statement and no wait, not even on SQLite while a long write
holds the database (a read-only `taproot_status` stays a read). What a crash loses is the
last second of notes; while the database is busy they wait, and when it cannot keep up,
the oldest beyond MAX_PENDING go first.
"""

import logging
from collections import deque
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

import anyio
from django.db import DatabaseError, IntegrityError
from django.utils import timezone
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext

from mcp_bridge.database import busy_message, run_sync
from mcp_bridge.request_log import is_tool_error
from oauth.activity import NotedCall, NotedRefusal, keep
from oauth.models import RefusalReason

logger = logging.getLogger("taproot.mcp")

WRITE_EVERY_SECONDS = 1.0
MAX_PENDING = 10_000

_calls: deque[NotedCall] = deque(maxlen=MAX_PENDING)
_refusals: deque[NotedRefusal] = deque(maxlen=MAX_PENDING)


def note_call(*, user_id: int, application_id: int, tool: str, ok: bool) -> None:
    _calls.append(NotedCall(user_id, application_id, _now(), tool, ok))


def note_refusal(*, user_id: int, application_id: int | None, reason: RefusalReason) -> None:
    """A refusal of a token that still names its user (and a client: a token issued to no
    client is shown on no card)."""
    if application_id is not None:
        _refusals.append(NotedRefusal(user_id, application_id, _now(), reason))


class CallNoting:
    """MCP middleware: notes each tools/call that was answered, ok or error, for the user
    and client its token names (`caller`). A call the SDK could not answer (a protocol
    error) is no reply Claude read, and is not noted; nor is any argument or reply."""

    def __init__(
        self, tool_names: Iterable[str], caller: Callable[[], tuple[int, int] | None]
    ) -> None:
        self.tool_names = frozenset(tool_names)
        self.caller = caller

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        result = await call_next(ctx)
        if ctx.method == "tools/call" and (caller := self.caller()) is not None:
            name = ctx.params.get("name") if ctx.params else None
            # A name Claude made up is client-sent text: it is kept as "(unknown)".
            tool = name if name in self.tool_names else "(unknown)"
            user_id, application_id = caller
            note_call(
                user_id=user_id,
                application_id=application_id,
                tool=tool,
                ok=not is_tool_error(result),
            )
        return result


def _now() -> datetime:
    return timezone.now()


def _taken[T](pending: deque[T]) -> list[T]:
    """What is pending, removed; notes made meanwhile stay for the next write."""
    return [pending.popleft() for _ in range(len(pending))]


async def write_noted() -> None:
    """Write what was noted so far (nothing when nothing was). When the database is busy
    (a long write holds it), the notes wait for the next write."""
    calls, refusals = _taken(_calls), _taken(_refusals)
    if not calls and not refusals:
        return
    try:
        await run_sync(keep, calls, refusals)
    except DatabaseError as error:
        if isinstance(error, IntegrityError):  # an account or client deleted meanwhile
            logger.warning("could not keep calls for the clients page: %s", error)
            return
        if busy_message(error) is None:
            logger.warning("could not keep calls for the clients page", exc_info=True)
            return
        _calls.extendleft(reversed(calls))
        _refusals.extendleft(reversed(refusals))


async def writing() -> None:
    """Write what was noted every WRITE_EVERY_SECONDS, for as long as the server serves;
    cancelled at shutdown, after which the caller writes the rest."""
    while True:
        await anyio.sleep(WRITE_EVERY_SECONDS)
        await write_noted()
