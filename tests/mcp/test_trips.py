"""A trip from the event loop to a pool's thread (mcp_bridge.trips): what the function
sees there and what the caller gets back, as with asgiref's sync_to_async before."""

import contextvars
import threading
from concurrent.futures import ThreadPoolExecutor

import anyio
import pytest

from mcp_bridge.trips import on_thread

seen: contextvars.ContextVar[str] = contextvars.ContextVar("seen", default="unset")


def test_the_function_runs_on_the_pools_thread_seeing_the_callers_context():
    def there(suffix: str) -> tuple[str, str]:
        value = seen.get()
        seen.set("set on the thread")
        return threading.current_thread().name, value + suffix

    async def main() -> tuple[tuple[str, str], str]:
        seen.set("the caller's")
        with ThreadPoolExecutor(1, thread_name_prefix="pool") as pool:
            found = await on_thread(pool, there, suffix="!")
        return found, seen.get()

    (thread, value), after = anyio.run(main)
    assert thread.startswith("pool")
    assert value == "the caller's!"
    assert after == "the caller's"  # what the thread set stays there


def test_the_functions_exception_reaches_the_caller():
    def fails() -> None:
        raise LookupError("no such row")

    async def main() -> None:
        with ThreadPoolExecutor(1) as pool:
            await on_thread(pool, fails)

    with pytest.raises(LookupError, match="no such row"):
        anyio.run(main)


def test_a_cancelled_caller_stops_waiting_and_a_running_call_runs_to_its_end():
    started, release, finished = threading.Event(), threading.Event(), threading.Event()
    queued: list[str] = []

    def running() -> None:
        started.set()
        release.wait(5)
        finished.set()

    async def main() -> None:
        with ThreadPoolExecutor(1) as pool:
            with anyio.move_on_after(0.2) as scope:
                async with anyio.create_task_group() as group:
                    group.start_soon(on_thread, pool, running)
                    await anyio.to_thread.run_sync(started.wait, 5)
                    # The pool's one thread is busy: this call waits in its queue.
                    group.start_soon(on_thread, pool, queued.append, "ran")
            assert scope.cancelled_caught
            release.set()
        assert finished.is_set()
        assert queued == []  # cancelled before a thread took it up: never ran

    anyio.run(main)
