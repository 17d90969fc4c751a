"""Stateless really means stateless: two uvicorn workers sharing one PostgreSQL answer
interleaved calls from one client, in both protocol eras, without errors."""

from collections import Counter
from typing import Any

import httpx2
import pytest

from tests.conftest import is_postgres
from tests.live_server import run_server
from tests.mcp.client import McpCaller, mcp_client
from tests.mcp.tokens import make_access_token
from tests.mcp.wrapped_apps import WORKER_HEADER

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.server, pytest.mark.postgres]


@pytest.fixture
def two_workers(django_db_blocker: Any, tmp_path: Any) -> Any:
    if not is_postgres():
        pytest.skip(
            "needs PostgreSQL (DATABASE_URL=postgres://…): several workers sharing one store "
            "is a PostgreSQL deployment; CI runs this in its PostgreSQL pass"
        )
    with run_server(
        workers=2, tmp_dir=tmp_path, app="tests.mcp.wrapped_apps:worker_tagged"
    ) as server:
        yield server


def test_two_workers_serve_interleaved_calls_from_one_client(two_workers, portal, user):
    server = two_workers
    token = make_access_token(user, resource=f"{server.url}/mcp")
    workers: Counter[str] = Counter()

    async def note_worker(response: httpx2.Response) -> None:
        if response.request.url.path == "/mcp":
            workers[response.headers.get(WORKER_HEADER.decode(), "?")] += 1

    http_options = {
        # A new connection per request, so the kernel hands requests to either worker.
        "limits": httpx2.Limits(max_keepalive_connections=0),
        "event_hooks": {"response": [note_worker]},
    }
    for mode in ("legacy", "auto"):
        session = mcp_client(f"{server.url}/mcp", token, mode=mode, **http_options)
        with portal.wrap_async_context_manager(session) as client:
            mcp = McpCaller(portal=portal, client=client, mode=mode)
            created = [
                mcp.reply(
                    "taproot_remember",
                    {
                        "category": "episodic",
                        "content": f"Interleaved note {i} ({mode}) about harbour kites.",
                        "gist": f"Harbour kites {i} {mode}",
                    },
                )["memory_id"]
                for i in range(12)
            ]
            for memory_id in created[:4]:
                mcp.reply("taproot_promote", {"memory_id": memory_id, "salience": "high"})
                mcp.reply("taproot_recall", {"ids": [memory_id]})
            mcp.reply("taproot_forget", {"action": "archive", "memory_id": created[-1]})
            recalled = mcp.reply("taproot_recall", {"query": "harbour kites", "limit": 50})
            returned = {r["id"] for r in recalled["results"]}
            assert set(created[:-1]) <= returned
            assert created[-1] not in returned
            assert mcp.reply("taproot_status")["archived"] == 1 + (mode == "auto")
            mcp.reply("taproot_close", {"reflection": f"Two workers, one store ({mode})."})
            assert mcp.reply("taproot_reflect")["recent_closings"]
    assert len(set(workers) - {"?"}) == 2, f"requests per worker: {dict(workers)}"
    assert "Traceback" not in server.log()


def test_an_edit_reaches_the_vectors_every_worker_keeps(two_workers, portal, user):
    """Each worker caches the owner's vectors for recall by meaning; an edit made through
    one worker is seen by the next recall in both."""
    server = two_workers
    token = make_access_token(user, resource=f"{server.url}/mcp")
    query = {"query": "vegan food preferences"}

    def recall_until_both_workers_answered(mcp: McpCaller, seen: Counter[str]) -> set[int]:
        counts: set[int] = set()
        for _ in range(40):
            counts.add(mcp.reply("taproot_recall", query)["count"])
            if len(set(seen) - {"?"}) == 2:
                return counts
        raise AssertionError(f"requests per worker: {dict(seen)}")

    before: Counter[str] = Counter()
    after: Counter[str] = Counter()
    current = before

    async def note_worker(response: httpx2.Response) -> None:
        if response.request.url.path == "/mcp":
            current[response.headers.get(WORKER_HEADER.decode(), "?")] += 1

    http_options = {
        "limits": httpx2.Limits(max_keepalive_connections=0),
        "event_hooks": {"response": [note_worker]},
    }
    with portal.wrap_async_context_manager(
        mcp_client(f"{server.url}/mcp", token, mode="auto", **http_options)
    ) as client:
        mcp = McpCaller(portal=portal, client=client, mode="auto")
        memory_id = mcp.reply(
            "taproot_remember",
            {
                "category": "relationship",
                "content": "Maya does not eat meat or fish.",
                "gist": "Vegetarian",
            },
        )["memory_id"]
        # Both workers find it by meaning, and so hold its vector.
        assert recall_until_both_workers_answered(mcp, before) == {1}
        mcp.reply(
            "taproot_remember",
            {
                "update_id": memory_id,
                "gist": "Steak night",
                "content": "Maya grills ribeye every Friday.",
            },
        )
        current = after
        # Neither worker answers from the vector it held.
        assert recall_until_both_workers_answered(mcp, after) == {0}
