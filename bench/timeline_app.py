"""Taproot's ASGI application with a timeline of each /mcp request: bench.call_timeline
serves it, from this checkout or another (it copies this file next to the worker as
`taproot_call_timeline`, so it imports nothing of this checkout's bench), in place of
`taproot_site.asgi:application`.

Each request notes `perf_counter` at its steps: arrival, each trip to a database thread
(submitted, started there, ended there, resumed on the loop), the user's place, the SDK's
Starlette app, its bearer check, its transport or mcp_bridge.exchange, its server, the
tool, the response's start and end, and the end of the request. What a checkout lacks
is not noted. Every 200 requests, the medians of the steps between consecutive notes go
to the file named by TAPROOT_TIMELINE_OUT as JSON.
"""

import contextvars
import importlib
import itertools
import json
import os
import statistics
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

# The application the worker serves, wrapped (set when the worker's copy is imported).
taproot: Any = None
Marks = list[tuple[str, float]]
_marks: contextvars.ContextVar[Marks | None] = contextvars.ContextVar("timeline", default=None)
_requests: list[Marks] = []
# The first requests warm the worker up: left out.
WARM_UP = 50


def note(step: str) -> None:
    marks = _marks.get()
    if marks is not None:
        marks.append((step, time.perf_counter()))


def _noting_async(owner: Any, name: str, step: str) -> None:
    original = getattr(owner, name)

    async def noted(*args: Any, **kwargs: Any) -> Any:
        note(step)
        return await original(*args, **kwargs)

    setattr(owner, name, noted)


def _noting_around(owner: Any, name: str, before: str, after: str, *, coroutine: bool) -> None:
    original = getattr(owner, name)
    if coroutine:

        async def noted_async(*args: Any, **kwargs: Any) -> Any:
            note(before)
            try:
                return await original(*args, **kwargs)
            finally:
                note(after)

        setattr(owner, name, noted_async)
    else:

        def noted(*args: Any, **kwargs: Any) -> Any:
            note(before)
            try:
                return original(*args, **kwargs)
            finally:
                note(after)

        setattr(owner, name, noted)


def _optional(module: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError:
        return None


def _instrument() -> None:
    database = importlib.import_module("mcp_bridge.database")
    _noting_around(database, "in_database_thread", "thread_start", "thread_end", coroutine=False)
    for holder in ("mcp_bridge.database", "mcp_bridge.auth", "mcp_bridge.replies"):
        _noting_around(
            importlib.import_module(holder), "run_sync", "trip", "resumed", coroutine=True
        )
    capacity = importlib.import_module("mcp_bridge.capacity")
    hold = capacity.UserSlots.hold

    @asynccontextmanager
    async def noted_hold(self: Any, *args: Any) -> AsyncIterator[Any]:
        note("place_asked")
        async with hold(self, *args) as admitted:
            note("place_given")
            yield admitted
            note("place_left")

    capacity.UserSlots.hold = noted_hold
    _noting_async(
        importlib.import_module("starlette.applications").Starlette, "__call__", "sdk_app"
    )
    bearer = importlib.import_module("mcp.server.auth.middleware.bearer_auth")
    _noting_async(bearer.RequireAuthMiddleware, "__call__", "sdk_bearer_checked")
    manager = importlib.import_module("mcp.server.streamable_http_manager")
    _noting_async(
        manager.StreamableHTTPSessionManager, "_handle_stateless_request", "sdk_stateless"
    )
    transport = importlib.import_module("mcp.server.streamable_http")
    _noting_async(transport.StreamableHTTPServerTransport, "_handle_post_request", "sdk_post")
    _noting_async(
        importlib.import_module("mcp.server.runner").ServerRunner, "_on_request", "sdk_server"
    )
    if (exchange := _optional("mcp_bridge.exchange")) is not None:
        _noting_async(exchange.Exchange, "__call__", "exchange")
    toolkit = importlib.import_module("mcp_bridge.toolkit")
    _noting_around(toolkit.ToolDefinition, "call", "tool", "tool_done", coroutine=True)


def step_medians(requests: list[Marks]) -> dict[str, float]:
    """The median time of each step between consecutive notes, in milliseconds, and of
    the requests in all."""
    steps: dict[str, list[float]] = {}
    for marks in requests:
        # A step noted again (the second trip) is told apart by its count: trip#2.
        seen: dict[str, int] = {}
        named = []
        for step, at in marks:
            seen[step] = seen.get(step, 0) + 1
            named.append((f"{step}#{seen[step]}" if seen[step] > 1 else step, at))
        for (before, at), (after, then) in itertools.pairwise(named):
            steps.setdefault(f"{before} -> {after}", []).append((then - at) * 1000)
    found = {step: round(statistics.median(times), 3) for step, times in steps.items()}
    totals = [(marks[-1][1] - marks[0][1]) * 1000 for marks in requests]
    found["request, in all"] = round(statistics.median(totals), 3)
    return found


async def application(scope: Any, receive: Callable[..., Any], send: Callable[..., Any]) -> None:
    if scope["type"] != "http" or scope["path"] != "/mcp":
        await taproot(scope, receive, send)
        return
    marks: Marks = [("arrived", time.perf_counter())]
    _marks.set(marks)

    async def send_noted(message: Any) -> None:
        if message["type"] == "http.response.start":
            note("response_started")
        await send(message)
        if message["type"] == "http.response.body" and not message.get("more_body"):
            note("response_sent")

    await taproot(scope, receive, send_noted)
    note("done")
    _requests.append(marks)
    if len(_requests) > WARM_UP and len(_requests) % 200 == 0:
        out = os.environ.get("TAPROOT_TIMELINE_OUT")
        if out:
            with open(out, "w") as file:
                measured = _requests[WARM_UP:]
                json.dump({"requests": len(measured), "steps": step_medians(measured)}, file)


if __name__ != "bench.timeline_app":  # the worker's copy; the bench's tests import this one
    # Named as the rest of the bench names it to uvicorn ("taproot_site.asgi:application"):
    # the bench, like every app, imports nothing of the project package.
    taproot = importlib.import_module("taproot_site.asgi").application
    _instrument()
