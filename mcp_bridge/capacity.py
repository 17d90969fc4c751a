"""What one worker lets /mcp requests hold while they are not running: the bytes of their
bodies (BufferBudget) and a place among those their user may have in progress (UserSlots).

Both live in the process and are used from its one event loop only (mcp_bridge.admission),
so they need no lock; with several workers, each has its own.
"""

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import anyio


class BufferFull(Exception):
    """Holding the request body would pass what the process may hold (BufferBudget)."""


class BufferBudget:
    """The bytes this process holds for /mcp requests that are not running yet: bodies
    arriving, bodies whose token is being checked, bodies waiting for their user's turn.

    Before authentication anyone can send a body, and each may be up to the SDK's limit
    (4 MiB): without a bound, a few hundred slow senders would take the process's memory.
    A request claims its declared Content-Length before a byte of it is read (a chunked
    one, its bytes as they arrive); a claim that would pass the limit is refused, and the
    request answered 503.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.held = 0

    def claim(self) -> "BufferClaim":
        return BufferClaim(self)


@dataclass
class BufferClaim:
    """One request's share of the BufferBudget."""

    budget: BufferBudget
    size: int = 0

    def grow_to(self, size: int) -> None:
        """Hold `size` bytes in all; raises BufferFull (holding no more) when the budget
        cannot spare them."""
        more = size - self.size
        if more <= 0:
            return
        if self.budget.held + more > self.budget.limit:
            raise BufferFull
        self.budget.held += more
        self.size = size

    def release(self) -> None:
        self.budget.held -= self.size
        self.size = 0


@dataclass
class _Turns:
    semaphore: anyio.Semaphore
    requests: int = 0  # in progress or waiting


class UserSlots:
    """How many /mcp requests each user has in progress in this process, and who waits.

    Keyed by the user the bearer token acts for once it is looked up, so every token of a
    user, however its header is spelled, counts against the one limit. A request past the
    limit waits its turn (first come, first served) for up to `wait` seconds; meanwhile it
    holds no database connection and no thread, only its body (see BufferBudget). A user's
    entry lasts only while they have requests in progress or waiting.
    """

    def __init__(self, limit: int, wait: float) -> None:
        self.limit = limit
        self.wait = wait
        self.users: dict[str, _Turns] = {}

    @asynccontextmanager
    async def hold(self, user: str) -> AsyncIterator[bool]:
        """Takes one of the user's places for the duration of the block, waiting for one
        to come free if need be; yields False (and takes none) when none did in time."""
        turns = self.users.get(user)
        if turns is None:
            turns = self.users[user] = _Turns(anyio.Semaphore(self.limit))
        turns.requests += 1
        try:
            if not await self._take(turns.semaphore):
                yield False
                return
            try:
                yield True
            finally:
                turns.semaphore.release()
        finally:
            turns.requests -= 1
            if not turns.requests:
                del self.users[user]

    async def _take(self, semaphore: anyio.Semaphore) -> bool:
        if self.wait <= 0:
            try:
                semaphore.acquire_nowait()
            except anyio.WouldBlock:
                return False
            return True
        with anyio.move_on_after(self.wait):
            await semaphore.acquire()
            return True
        return False
