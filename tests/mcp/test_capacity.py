"""What a worker lets /mcp requests hold, on its own (mcp_bridge.capacity); the behaviour
over HTTP is in test_bursts.py and test_slow_clients.py."""

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest

from mcp_bridge.capacity import BufferBudget, BufferFull, UserSlots


def test_a_claim_is_refused_past_the_budget_and_gives_back_what_it_held():
    budget = BufferBudget(100)
    first, second = budget.claim("alice"), budget.claim("bob")
    first.grow_to(60)
    first.grow_to(40)  # a claim never shrinks while it lives
    with pytest.raises(BufferFull):
        second.grow_to(41)
    assert (budget.held, second.size) == (60, 0)
    second.grow_to(40)
    first.release()
    first.release()  # once is enough: releasing again gives back nothing more
    assert budget.held == 40


def test_each_user_holds_at_most_their_share_and_the_rest_stays_for_others():
    budget = BufferBudget(100, per_user=30)
    alice = [budget.claim("alice") for _ in range(3)]
    alice[0].grow_to(20)
    alice[1].grow_to(10)
    with pytest.raises(BufferFull):
        alice[2].grow_to(1)  # Alice's requests together hold her 30
    bob = budget.claim("bob")
    bob.grow_to(30)
    assert (budget.held, budget.held_by) == (60, {"alice": 30, "bob": 30})
    alice[0].release()
    alice[2].grow_to(20)
    alice[1].release()
    alice[2].release()
    assert budget.held_by == {"bob": 30}


def test_places_are_per_user_and_given_in_the_order_asked():
    slots = UserSlots(limit=2, wait=5, shared=2, recent=0)
    order: list[str] = []

    async def request(user: str, name: str, hold: anyio.Event) -> None:
        async with slots.hold(user) as admitted:
            assert admitted
            order.append(name)
            await hold.wait()

    async def main() -> None:
        release = anyio.Event()
        async with anyio.create_task_group() as group:
            for n in range(5):
                group.start_soon(request, "alice", f"alice-{n}", release)
                await anyio.sleep(0.01)  # asked in this order
            group.start_soon(request, "bob", "bob", release)
            await anyio.sleep(0.05)
            # Alice's first two run; Bob runs beside them, not behind her three waiting.
            assert order == ["alice-0", "alice-1", "bob"]
            assert slots.users["alice"].requests == 5
            release.set()
        assert order == ["alice-0", "alice-1", "bob", "alice-2", "alice-3", "alice-4"]
        assert slots.users == {}  # no entry outlives a user's requests

    anyio.run(main)


def test_a_request_that_gets_no_place_in_time_is_told_so_and_leaves_none_taken():
    async def main() -> None:
        for wait in (0, 0.1):
            slots = UserSlots(limit=1, wait=wait, recent=0)
            async with slots.hold("alice") as first:
                assert first
                async with slots.hold("alice") as second:
                    assert not second
            async with slots.hold("alice") as again:
                assert again
            assert slots.users == {}

    anyio.run(main)


def test_only_a_request_that_waits_enters_what_it_does_while_waiting():
    """The admission watches for the client leaving only while its request waits: one
    whose place is free at once, the usual case, starts no watcher."""
    slots = UserSlots(limit=1, wait=5, recent=0)
    entered: list[str] = []

    def while_waiting(name: str) -> Any:
        @asynccontextmanager
        async def waiting() -> AsyncIterator[None]:
            entered.append(f"{name} waits")
            yield
            entered.append(f"{name} done waiting")

        return waiting

    async def request(name: str, release: anyio.Event) -> None:
        async with slots.hold("alice", None, while_waiting(name)) as admitted:
            assert admitted
            entered.append(f"{name} runs")
            await release.wait()

    async def main() -> None:
        first, second = anyio.Event(), anyio.Event()
        async with anyio.create_task_group() as group:
            group.start_soon(request, "first", first)
            await anyio.sleep(0.01)
            group.start_soon(request, "second", second)
            await anyio.sleep(0.01)
            assert entered == ["first runs", "second waits"]
            first.set()
            second.set()
        assert entered == ["first runs", "second waits", "second done waiting", "second runs"]

    anyio.run(main)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_while_another_user_has_work_each_runs_one_request_at_a_time():
    clock = Clock()
    slots = UserSlots(limit=4, wait=5, shared=1, recent=1.0, clock=clock)
    running: list[str] = []

    async def request(user: str, name: str, release: anyio.Event) -> None:
        async with slots.hold(user) as admitted:
            assert admitted
            running.append(name)
            await release.wait()
            running.remove(name)

    async def main() -> None:
        first, second = anyio.Event(), anyio.Event()
        async with anyio.create_task_group() as group:
            # Alone, Alice runs four at once; her fifth waits.
            for n in range(5):
                group.start_soon(request, "alice", f"alice-{n}", first if n < 4 else second)
            await anyio.sleep(0.05)
            assert running == ["alice-0", "alice-1", "alice-2", "alice-3"]
            # Bob's one request runs at once, beside hers.
            group.start_soon(request, "bob", "bob", first)
            await anyio.sleep(0.05)
            assert running[-1] == "bob"
            first.set()
            await anyio.sleep(0.05)
            # Bob ended a moment ago: Alice's waiting request runs, one at a time.
            assert running == ["alice-4"]
            assert set(slots.users) == {"alice", "bob"}
            group.start_soon(request, "alice", "alice-5", second)
            await anyio.sleep(0.05)
            assert running == ["alice-4"]
            # Once Bob has been gone a while, Alice has her four places again.
            clock.now += 1.5
            second.set()
            await anyio.sleep(0.05)
            assert running == []
        assert set(slots.users) == {"alice"}  # Bob forgotten
        # Alone again, Alice runs four at once.
        third = anyio.Event()
        async with anyio.create_task_group() as group:
            for n in range(4):
                group.start_soon(request, "alice", f"again-{n}", third)
            await anyio.sleep(0.05)
            assert len(running) == 4
            third.set()
        clock.now += 1.5
        async with slots.hold("carol"):
            pass
        assert set(slots.users) == {"carol"}

    anyio.run(main)


def test_a_user_with_requests_waiting_steps_aside_for_another_users_running_one():
    slots = UserSlots(limit=1, wait=5, shared=1, recent=0)
    events: list[str] = []

    async def bob(release: anyio.Event) -> None:
        async with slots.hold("bob"):
            events.append("bob runs")
            await release.wait()
            events.append("bob ends")

    async def alice(name: str, release: anyio.Event) -> None:
        async with slots.hold("alice"):
            await release.wait()
            await slots.step_aside("alice")
            events.append(f"{name} goes on")

    async def main() -> None:
        bobs, alices = anyio.Event(), anyio.Event()
        async with anyio.create_task_group() as group:
            group.start_soon(alice, "alice-0", alices)
            group.start_soon(alice, "alice-1", alices)  # waits: Alice has a backlog
            await anyio.sleep(0.02)
            group.start_soon(bob, bobs)
            await anyio.sleep(0.02)
            alices.set()  # alice-0 reaches the point between its steps
            await anyio.sleep(0.05)
            assert events == ["bob runs"]  # it waits for Bob's request
            bobs.set()
        # alice-1 had no backlog behind it: it went on without waiting.
        assert events == ["bob runs", "bob ends", "alice-0 goes on", "alice-1 goes on"]

    anyio.run(main)


def test_stepping_aside_is_bounded_and_free_without_a_backlog(monkeypatch):
    monkeypatch.setattr("mcp_bridge.capacity.STEP_ASIDE_SECONDS", 0.1)
    slots = UserSlots(limit=2, wait=5, shared=2, recent=0)

    async def main() -> None:
        release = anyio.Event()

        async def bob() -> None:
            async with slots.hold("bob"):
                await release.wait()

        async with anyio.create_task_group() as group:
            group.start_soon(bob)
            await anyio.sleep(0.02)
            async with slots.hold("alice"):
                with anyio.fail_after(0.05):
                    await slots.step_aside("alice")  # no backlog: at once
                async with slots.hold("alice"):
                    slots.users["alice"].queue.append(object())  # a third one waiting
                    began = anyio.current_time()
                    await slots.step_aside("alice")
                    assert 0.1 <= anyio.current_time() - began < 1
                    slots.users["alice"].queue.clear()
            release.set()

    anyio.run(main)


def test_a_flooding_user_steps_aside_between_batches_and_not_for_another_flooder(monkeypatch):
    # A flood sent a few calls at a time: the last call of a batch has no backlog behind
    # it, yet its user is still flooding and waits for another user's single call.
    monkeypatch.setattr("mcp_bridge.capacity.STEP_ASIDE_SECONDS", 0.1)
    clock = Clock()
    slots = UserSlots(limit=4, wait=5, shared=1, recent=1.0, clock=clock)
    order: list[str] = []

    async def main() -> None:
        release = anyio.Event()

        async def bob() -> None:
            async with slots.hold("bob"):
                order.append("bob runs")
                await release.wait()
                order.append("bob ends")

        async def alice_last_of_batch() -> None:
            async with slots.hold("alice"):
                await slots.step_aside("alice")
                order.append("alice goes on")

        async with slots.hold("alice"), slots.hold("alice"):
            pass  # Alice sent two at once a moment ago
        assert not slots.users["alice"].queue
        async with anyio.create_task_group() as group:
            group.start_soon(bob)
            await anyio.sleep(0.02)
            group.start_soon(alice_last_of_batch)
            await anyio.sleep(0.02)
            assert order == ["bob runs"]  # Alice waits for Bob's call
            release.set()
        assert order == ["bob runs", "bob ends", "alice goes on"]

        # Once the moment has passed, Alice sends one at a time and never waits.
        clock.now += 1.5
        release = anyio.Event()
        async with anyio.create_task_group() as group:
            group.start_soon(bob)
            await anyio.sleep(0.02)
            async with slots.hold("alice"):
                with anyio.fail_after(0.05):
                    await slots.step_aside("alice")
            release.set()

        # Two flooding users do not wait for each other.
        for user in ("alice", "carol"):
            async with slots.hold(user), slots.hold(user):
                pass
        async with slots.hold("carol"), slots.hold("alice"):
            with anyio.fail_after(0.05):
                await slots.step_aside("alice")
                await slots.step_aside("carol")

    anyio.run(main)
