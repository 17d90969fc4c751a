"""What one worker lets /mcp requests hold while they are not running: the bytes of their
bodies, per user and in all (BufferBudget), and a place among those their user may have
in progress (UserSlots), which also shares the worker evenly between users who have work
on it at once.

Both live in the process and are used from its one event loop only (mcp_bridge.admission),
so they need no lock; with several workers, each has its own.
"""

import math
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager, nullcontext
from contextvars import ContextVar
from dataclasses import dataclass, field

import anyio


class BufferFull(Exception):
    """Holding the request body would pass what the process may hold (BufferBudget)."""


# How many users' bodies at their largest the process's budget holds at once: each user
# may hold this share of it (at least one body of the largest size), so that one user's
# bodies, however many and however slow, leave the rest to everyone else.
USERS_SHARING_BUFFER = 4


class BufferBudget:
    """The bytes this process holds for /mcp requests that are not running yet: bodies
    arriving and bodies waiting for their user's turn, per user and in all.

    Only a request whose token is known to be valid holds anything here (the token is
    looked up before its body is read), and it holds the bytes that arrived, not those
    it declared: a socket that declares 4 MiB and sends nothing holds nothing. Each user
    may hold `per_user` bytes and all of them together `limit`: a claim that would pass
    either is refused, and the request answered 503.
    """

    def __init__(self, limit: int, *, per_user: int | None = None) -> None:
        self.limit = limit
        self.per_user = limit if per_user is None else min(per_user, limit)
        self.held = 0
        self.held_by: dict[str, int] = {}

    def claim(self, user: str) -> "BufferClaim":
        return BufferClaim(self, user)


@dataclass
class BufferClaim:
    """One request's share of the BufferBudget."""

    budget: BufferBudget
    user: str
    size: int = 0

    def grow_to(self, size: int) -> None:
        """Hold `size` bytes in all; raises BufferFull (holding no more) when the budget,
        or the user's share of it, cannot spare them."""
        more = size - self.size
        if more <= 0:
            return
        budget = self.budget
        users = budget.held_by.get(self.user, 0)
        if budget.held + more > budget.limit or users + more > budget.per_user:
            raise BufferFull
        budget.held += more
        budget.held_by[self.user] = users + more
        self.size = size

    def release(self) -> None:
        if not self.size:
            return
        budget = self.budget
        budget.held -= self.size
        left = budget.held_by[self.user] - self.size
        if left:
            budget.held_by[self.user] = left
        else:
            del budget.held_by[self.user]
        self.size = 0


# While other users have work on the worker, how many requests each user may have
# running (the rest of their places wait): one. A worker's Python runs on one core at a
# time, so a user's parallel calls barely finish sooner than one after the other, and
# each one running takes another share of that core from everyone else. Measured with
# one user sending remembers of 20,000 emoji five at a time, another user's recall took
# 2.5-3 times as long as alone with the first user's calls all running, about 2 times
# with one, and 1.7-1.8 times once that one also stepped aside (docs/benchmarks.md, "One
# user never slows another").
SHARED_RUNNING = 1
# How long after a user's last request ended they still count as having work here: a
# person's Claude sends its calls one after the other, with a moment between them.
RECENT_SECONDS = 1.0
# The longest a request of a user with others waiting steps aside, before each of its
# steps (embedding its text, its database work), for other users' running requests
# (UserSlots.step_aside).
STEP_ASIDE_SECONDS = 0.25


@dataclass
class _Turns:
    queue: deque[object] = field(default_factory=deque)  # waiting requests, first come first
    running: int = 0
    ended_at: float = -math.inf
    # When the user last had a request arrive while another was in progress or waiting:
    # within `recent` seconds of it, the user counts as flooding (UserSlots.step_aside).
    crowded_at: float = -math.inf

    @property
    def requests(self) -> int:
        """In progress or waiting."""
        return self.running + len(self.queue)


class UserSlots:
    """How many /mcp requests each user has in progress in this process, and who waits.

    Keyed by the user the bearer token acts for once it is looked up, so every token of a
    user, however its header is spelled, counts against the one limit. A user alone on the
    worker may have `limit` requests running; while other users have requests running,
    waiting or just ended (within `recent` seconds), each may have `shared`, so that one
    user's burst or flood takes no more of the worker than another's single call. A
    request past its user's limit waits its turn (first come, first served) for up to
    `wait` seconds; meanwhile it holds no database connection and no thread, only its body
    (see BufferBudget). A user's entry lasts while they have requests in progress or
    waiting, and `recent` seconds more.
    """

    def __init__(
        self,
        limit: int,
        wait: float,
        *,
        shared: int = SHARED_RUNNING,
        recent: float = RECENT_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.limit = limit
        self.wait = wait
        self.shared = min(shared, limit)
        self.recent = recent
        self.clock = clock
        self.users: dict[str, _Turns] = {}
        self._woken: set[anyio.Event] = set()

    @asynccontextmanager
    async def hold(
        self,
        user: str,
        gone: anyio.Event | None = None,
        while_waiting: Callable[[], AbstractAsyncContextManager[object]] | None = None,
    ) -> AsyncIterator[bool]:
        """Takes one of the user's places for the duration of the block, waiting for one
        to come free if need be; yields False (and takes none) when none did in time, or
        when `gone` is set meanwhile (the client left: call `wake` after setting it).

        `while_waiting()` is entered only when the request has to wait, around the
        wait (the caller watches there for the client leaving): a request whose place
        is free at once, the usual case, pays for no watching."""
        turns = self.users.get(user)
        if turns is None:
            turns = self.users[user] = _Turns()
        ticket = object()
        turns.queue.append(ticket)
        if turns.requests > 1:
            turns.crowded_at = self.clock()
        admitted = False
        try:
            admitted = await self._turn(turns, ticket, gone, while_waiting)
        finally:
            turns.queue.remove(ticket)
            turns.running += admitted
            self._changed()
        if not admitted:
            yield False
            return
        try:
            yield True
        finally:
            turns.running -= 1
            turns.ended_at = self.clock()
            self._changed()

    async def step_aside(self, user: str) -> None:
        """Between the steps of a request: when its user is flooding (has more requests
        waiting, or had several at once within the last `recent` seconds: a burst or a
        flood sent a few at a time), let the running requests of users who are not
        flooding finish first, for up to STEP_ASIDE_SECONDS. Their calls then share the
        worker with one step of this one, not all of it. A user who sends one call at a
        time never waits here, and two flooding users never wait for each other."""
        turns = self.users.get(user)
        if turns is None or not (turns.queue or self._flooding(turns)):
            return
        with anyio.move_on_after(STEP_ASIDE_SECONDS):
            await self._until(
                lambda: (
                    not any(
                        o is not turns and o.running and not self._flooding(o)
                        for o in self.users.values()
                    )
                )
            )

    def _flooding(self, turns: _Turns) -> bool:
        return bool(turns.queue) or self.clock() - turns.crowded_at < self.recent

    def _limit(self, turns: _Turns) -> int:
        now = self.clock()
        others = any(
            other is not turns
            and (other.running or other.queue or now - other.ended_at < self.recent)
            for other in self.users.values()
        )
        return self.shared if others else self.limit

    def _may_run(self, turns: _Turns, ticket: object) -> bool:
        return turns.queue[0] is ticket and turns.running < self._limit(turns)

    async def _turn(
        self,
        turns: _Turns,
        ticket: object,
        gone: anyio.Event | None,
        while_waiting: Callable[[], AbstractAsyncContextManager[object]] | None,
    ) -> bool:
        if self._may_run(turns, ticket):
            return True
        if self.wait <= 0:
            return False
        left = gone.is_set if gone is not None else lambda: False
        async with while_waiting() if while_waiting is not None else nullcontext():
            with anyio.move_on_after(self.wait):
                await self._until(lambda: left() or self._may_run(turns, ticket))
                return not left()
        return False

    async def _until(self, ready: Callable[[], bool]) -> None:
        """Wait until `ready()`, asking again each time a place comes free or a request
        leaves a queue (the caller bounds the wait)."""
        while not ready():
            woken = anyio.Event()
            self._woken.add(woken)
            try:
                await woken.wait()
            finally:
                self._woken.discard(woken)

    def wake(self) -> None:
        """Every waiting request looks again (a few at most)."""
        for woken in self._woken:
            woken.set()

    def _changed(self) -> None:
        """A place came free or a request left a queue: every waiting request looks again,
        and users with nothing left here are forgotten."""
        self.wake()
        now = self.clock()
        for user in [
            name
            for name, turns in self.users.items()
            if not turns.requests and now - turns.ended_at >= self.recent
        ]:
            del self.users[user]


# The worker's UserSlots and the user of the request being served, for its later steps.
current_place: ContextVar[tuple[UserSlots, str] | None] = ContextVar(
    "taproot_current_place", default=None
)


async def step_aside() -> None:
    """UserSlots.step_aside for the request being served (nothing outside /mcp)."""
    place = current_place.get()
    if place is not None:
        slots, user = place
        await slots.step_aside(user)
