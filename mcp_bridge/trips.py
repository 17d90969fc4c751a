"""A trip from the event loop to a thread of one of the /mcp pools (mcp_bridge.database,
mcp_bridge.embedding) and back.

asgiref's `sync_to_async(thread_sensitive=False, executor=pool)` made the trip before:
the function on one of the pool's threads, in a copy of the caller's context. It also
keeps the bookkeeping a function that calls back into async code needs (it runs none on
these threads), copies every context variable back after the call and shields the wait;
that cost about 55 microseconds a trip in a loop of empty calls, two or three trips a
tool call (docs/benchmarks.md, "The fixed cost of a call"). `on_thread` is the trip
without them: what the function sees (the caller's context variables, its own thread's
connection) and what the caller gets (its result or its exception) are the same, and
when the caller is cancelled, a call no thread has taken up yet is dropped and one
already running runs to its end, as before. Nothing on these threads sets a context
variable the caller reads afterwards (the request's record is one object both share).
"""

import asyncio
import contextvars
import functools
from collections.abc import Callable
from concurrent.futures import Executor


async def on_thread[**P, R](
    pool: Executor, function: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs
) -> R:
    """`function(*args, **kwargs)` on one of `pool`'s threads, in a copy of the caller's
    context (its context variables visible there, what it sets left there)."""
    context = contextvars.copy_context()
    call = functools.partial(context.run, function, *args, **kwargs)
    return await asyncio.get_running_loop().run_in_executor(pool, call)
