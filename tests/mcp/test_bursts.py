"""A burst of parallel calls waits its turn instead of being refused: each user may have
TAPROOT_MCP_REQUESTS_PER_USER requests in progress per worker (all of their tokens, however
the header is spelled, together); more wait for a place, holding no database connection,
for up to TAPROOT_MCP_QUEUE_TIMEOUT seconds, and only then get 429 with Retry-After.
Another user is served meanwhile.

Real uvicorn servers and the real MCP client over HTTP. To keep a user's places taken for
as long as a test needs, it blocks memory writes in the database (a lock the test holds,
as a long write by someone else would): `taproot_remember` calls then stay in progress.
"""

import re
import sqlite3
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import anyio
import httpx2
import pytest
from django.db import connection, transaction

from mcp_bridge.capacity import RECENT_SECONDS, STEP_ASIDE_SECONDS
from memories.models import Memory
from tests.conftest import is_postgres
from tests.live_server import LiveServer, run_server
from tests.mcp.client import decode, mcp_client
from tests.mcp.test_auth import INITIALIZE
from tests.mcp.test_endpoint import ACCEPT
from tests.mcp.test_slow_clients import eventually
from tests.mcp.tokens import make_access_token

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.server]

PLACES = 2
QUEUE_TIMEOUT = 3
NARROW = {
    "TAPROOT_MCP_REQUESTS_PER_USER": str(PLACES),
    "TAPROOT_MCP_QUEUE_TIMEOUT": str(QUEUE_TIMEOUT),
    # On PostgreSQL: one connection beyond the places, so that a waiting request that held
    # a connection would leave the other user none (they would get 503 within a second).
    "TAPROOT_DB_POOL_SIZE": str(PLACES + 1),
    "TAPROOT_DB_POOL_TIMEOUT": "1",
}
# "Bearer", in four cases, then one to four spaces: 16 spellings of one token's header.
SPELLINGS = [
    f"{scheme}{' ' * spaces}"
    for scheme in ("Bearer", "bearer", "BEARER", "bEaReR")
    for spaces in range(1, 5)
]


@pytest.fixture(scope="module")
def narrow(
    django_db_setup: None, django_db_blocker: Any, tmp_path_factory: Any
) -> Iterator[LiveServer]:
    with (
        django_db_blocker.unblock(),
        run_server(tmp_dir=tmp_path_factory.mktemp("narrow"), env=NARROW) as server,
    ):
        yield server


def post(server: LiveServer, authorization: str, body: dict[str, Any] = INITIALIZE) -> Any:
    headers = {**ACCEPT, "Authorization": authorization}
    return httpx2.post(f"{server.url}/mcp", json=body, headers=headers, timeout=30)


def remember_call(gist: str) -> dict[str, Any]:
    arguments = {"category": "episodic", "content": f"{gist}.", "gist": gist}
    params = {"name": "taproot_remember", "arguments": arguments}
    return {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": params}


@contextmanager
def memory_writes_blocked() -> Iterator[None]:
    """Memory writes wait while the block runs; reads go on (SQLite's WAL, PostgreSQL's
    EXCLUSIVE mode, which lets plain SELECTs through)."""
    if is_postgres():
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(f"LOCK TABLE {Memory._meta.db_table} IN EXCLUSIVE MODE")
            yield
        return
    holder = sqlite3.connect(connection.settings_dict["NAME"], isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")  # the database's one write lock
        yield
        holder.execute("ROLLBACK")
    finally:
        holder.close()


@contextmanager
def places_taken(server: LiveServer, authorizations: list[str]) -> Iterator[list[Future[Any]]]:
    """Each authorization's `taproot_remember`, in progress (its write blocked) for the
    length of the block; then they complete. Yields their responses to come."""
    assert len(authorizations) == PLACES
    # Alone on the worker, a user has all her places; another user's request of a moment
    # ago would leave her one (mcp_bridge.capacity).
    time.sleep(RECENT_SECONDS)
    with ThreadPoolExecutor(PLACES) as pool, memory_writes_blocked():
        held = [
            pool.submit(post, server, authorization, remember_call(f"Held write {n}"))
            for n, authorization in enumerate(authorizations)
        ]
        probe = authorizations[0]
        # Both places are taken once a request of this user waits its whole turn in vain.
        assert eventually(lambda: post(server, probe).status_code == 429, timeout=30)
        assert not any(request.done() for request in held)
        yield held
    for response in (request.result() for request in held):
        assert response.status_code == 200, response.text
        assert not response.json()["result"]["isError"], response.text


def timed(request: Callable[[], Any]) -> tuple[Any, float]:
    began = time.monotonic()
    response = request()
    return response, time.monotonic() - began


def test_a_burst_of_20_recalls_and_8_writes_on_one_token_all_succeed(
    portal, mcp_url, user, other_user, token_for, make_memory
):
    """Claude sends the tool calls of one message at once (Claude Code up to 14), all on
    the one token Claude.ai keeps for a user: with 8 places a worker, 20 of these 28 wait
    their turn, and none fails."""
    recalled = [
        make_memory(content=f"The lighthouse keeper's log, page {n}.", gist=f"Lighthouse log {n}")
        for n in range(3)
    ]
    alice, bob = token_for(user), token_for(other_user)
    recall = {"query": "lighthouse keeper", "limit": 3}

    async def burst() -> tuple[list[Any], Any, list[float], float]:
        results: list[Any] = []
        finished: list[float] = []
        other: list[Any] = []
        other_finished: list[float] = []
        async with (
            mcp_client(mcp_url, alice, mode="legacy") as client,
            mcp_client(mcp_url, bob, mode="legacy") as other_client,
        ):

            async def call(name: str, arguments: dict[str, Any]) -> None:
                results.append(await client.call_tool(name, arguments))
                finished.append(time.monotonic())

            async def bobs_call() -> None:
                other.append(await other_client.call_tool("taproot_status", {}))
                other_finished.append(time.monotonic())

            async with anyio.create_task_group() as group:
                for _ in range(20):
                    group.start_soon(call, "taproot_recall", recall)
                for n in range(8):
                    gist = f"Garden plan {n}"
                    arguments = {"category": "episodic", "content": f"{gist}.", "gist": gist}
                    group.start_soon(call, "taproot_remember", arguments)
                group.start_soon(bobs_call)
        return results, other[0], finished, other_finished[0]

    results, bobs, finished, bob_finished = portal.call(burst)
    assert len(results) == 28
    for result in results:
        assert not result.is_error, decode(result)
        assert decode(result)["status"] == "ok"
    recalls = [decode(r) for r in results if "results" in decode(r)]
    assert len(recalls) == 20
    assert all(len(reply["results"]) == 3 for reply in recalls)
    # Every recall strengthened every memory it returned: exactly 20 each, none lost.
    counts = Memory.objects.filter(pk__in=[m.pk for m in recalled]).values_list(
        "retrieval_count", flat=True
    )
    assert list(counts) == [20] * len(recalled)
    assert Memory.objects.filter(owner=user, gist__startswith="Garden plan").count() == 8
    # Bob was served alongside, not after Alice's queue.
    assert not bobs.is_error and decode(bobs)["status"] == "ok"
    assert bob_finished < max(finished)


def test_several_tokens_of_one_user_share_one_limit_and_the_wait_ends_in_429(
    narrow, user, other_user
):
    tokens = [make_access_token(user, resource=f"{narrow.url}/mcp") for _ in range(3)]
    bob = make_access_token(other_user, resource=f"{narrow.url}/mcp")
    start = narrow.log_position()
    with places_taken(narrow, [f"Bearer {tokens[0]}", f"Bearer {tokens[1]}"]):
        # A third token of the same user waits for a place, then is refused.
        refused, waited = timed(lambda: post(narrow, f"Bearer {tokens[2]}"))
        assert refused.status_code == 429, refused.text
        assert QUEUE_TIMEOUT <= waited < QUEUE_TIMEOUT + 5
        assert refused.headers["retry-after"] == "5"
        assert refused.json()["error"]["message"] == (
            f"Too many requests at once for this account: this one waited {QUEUE_TIMEOUT} "
            "seconds for others to finish. Try again in 5 seconds."
        )
        # Another user is served at once, not queued behind Alice.
        served, took = timed(lambda: post(narrow, f"Bearer {bob}"))
        assert served.status_code == 200, served.text
        assert took < QUEUE_TIMEOUT
    # Both held writes completed once the database let them: nothing was lost.
    assert Memory.objects.filter(owner=user, gist__startswith="Held write").count() == PLACES
    log = narrow.log(since=start)
    assert re.search(rf"POST - user={user.pk} status=429 outcome=too_many_requests \d", log), log
    assert "Traceback" not in log


def test_every_spelling_of_the_bearer_header_counts_against_the_one_limit(narrow, user, other_user):
    token = make_access_token(user, resource=f"{narrow.url}/mcp")
    bob = make_access_token(other_user, resource=f"{narrow.url}/mcp")
    spelled = [f"{scheme}{token}" for scheme in SPELLINGS]
    # Each spelling alone is the same token, and opens the endpoint.
    for authorization in spelled:
        assert post(narrow, authorization).status_code == 200, repr(authorization)
    with places_taken(narrow, spelled[:PLACES]), ThreadPoolExecutor(len(spelled)) as pool:
        waiting = [pool.submit(post, narrow, authorization) for authorization in spelled[PLACES:]]
        # While 14 of Alice's requests wait for a place, Bob is served.
        served = post(narrow, f"Bearer {bob}")
        assert not any(request.done() for request in waiting)
        assert served.status_code == 200, served.text
        statuses = [request.result().status_code for request in waiting]
    assert statuses == [429] * (len(spelled) - PLACES)


def test_a_request_waiting_for_a_place_gets_it_when_one_comes_free(narrow, user):
    token = make_access_token(user, resource=f"{narrow.url}/mcp")
    with ThreadPoolExecutor(1) as pool:
        with places_taken(narrow, [f"Bearer {token}"] * PLACES):
            waiting = pool.submit(post, narrow, f"Bearer {token}", remember_call("Queued"))
            time.sleep(0.5)  # it is waiting for a place by now
            assert not waiting.done()
        # The held writes finished, and the waiting one had its turn.
        response = waiting.result()
    assert response.status_code == 200, response.text
    assert not response.json()["result"]["isError"], response.text
    assert Memory.objects.filter(owner=user, gist="Queued").exists()


def test_a_request_whose_client_left_while_it_waited_never_runs(narrow, user):
    """A client that gives up on a queued call (a timeout, a closed conversation) has its
    request dropped from the queue: the remember it sent is not written later, when a
    place comes free."""
    token = make_access_token(user, resource=f"{narrow.url}/mcp")
    start = narrow.log_position()
    with places_taken(narrow, [f"Bearer {token}"] * PLACES):
        headers = {**ACCEPT, "Authorization": f"Bearer {token}"}
        with pytest.raises(httpx2.TimeoutException):
            # Waits for a place, then the client gives up and closes the connection.
            httpx2.post(
                f"{narrow.url}/mcp", json=remember_call("Abandoned"), headers=headers, timeout=1
            )
        assert eventually(lambda: "outcome=client_gone" in narrow.log(since=start), timeout=10)
    # The held writes finished; the abandoned call had left the queue by then.
    assert not Memory.objects.filter(owner=user, gist="Abandoned").exists()
    log = narrow.log(since=start)
    assert re.search(rf"POST - user={user.pk} status=499 outcome=client_gone", log), log
    assert "Traceback" not in log


def status_call() -> dict[str, Any]:
    params = {"name": "taproot_status", "arguments": {}}
    return {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": params}


def test_a_flooding_account_lets_another_accounts_running_call_go_first(narrow, user, other_user):
    """Alice has just had two calls in progress at once (a flood); while Bob's call runs,
    her next call, though nothing of hers waits behind it, steps aside before its work
    for up to STEP_ASIDE_SECONDS (mcp_bridge.capacity). Calls are held in progress by a
    blocked write; Alice's status calls are reads, so only stepping aside delays them."""
    alice = f"Bearer {make_access_token(user, resource=f'{narrow.url}/mcp')}"
    bob = f"Bearer {make_access_token(other_user, resource=f'{narrow.url}/mcp')}"
    time.sleep(RECENT_SECONDS)
    with ThreadPoolExecutor(2) as pool:
        with memory_writes_blocked():
            # Alone, Alice has both places: her status runs beside her held write.
            held = pool.submit(post, narrow, alice, remember_call("Alice's long write"))
            time.sleep(0.2)
            assert post(narrow, alice, status_call()).status_code == 200
        assert held.result().status_code == 200
        with memory_writes_blocked():
            bobs = pool.submit(post, narrow, bob, remember_call("Bob's long write"))
            time.sleep(0.2)  # Bob's call is running, its write waiting for the lock
            response, took = timed(lambda: post(narrow, alice, status_call()))
            assert response.status_code == 200, response.text
            assert not bobs.done()
        assert bobs.result().status_code == 200
    assert took >= STEP_ASIDE_SECONDS
