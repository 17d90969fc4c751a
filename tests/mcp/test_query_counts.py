"""How many statements each /mcp request sends to the database, pinned: a real server
(tests.mcp.wrapped_apps:query_counted counts them per request) and real requests.

Every request: the token, its user and the user's latest reflect and close in one query
(mcp_bridge.auth). Then the tool's own: see each test. remember and recall need no more
to know whether a reflect is due (the latest reflect and close came with the token; it
took a query of its own before issue 32). SQLite's BEGIN
is not counted (PostgreSQL starts a transaction without a statement); COMMIT is not a
statement on either.
"""

import json
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest

from tests.conftest import is_postgres
from tests.live_server import LiveServer, run_server
from tests.mcp.test_auth import INITIALIZE
from tests.mcp.test_endpoint import ACCEPT, tool_call
from tests.mcp.tokens import make_access_token
from tests.mcp.wrapped_apps import QUERIES_HEADER, STATEMENTS_HEADER

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.server]

TOKEN_LOOKUP = 1


@pytest.fixture(scope="module")
def counting(
    django_db_setup: None, django_db_blocker: Any, tmp_path_factory: Any
) -> Iterator[LiveServer]:
    with (
        django_db_blocker.unblock(),
        run_server(
            tmp_dir=tmp_path_factory.mktemp("counting"),
            app="tests.mcp.wrapped_apps:query_counted",
        ) as server,
    ):
        yield server


@pytest.fixture
def send(counting: LiveServer, user: Any) -> Any:
    token = make_access_token(user, resource=f"{counting.url}/mcp")

    def post(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        response = httpx2.post(
            f"{counting.url}/mcp",
            json=body,
            headers={**ACCEPT, "Authorization": f"Bearer {token}"},
            timeout=10,
        )
        assert response.status_code == 200, response.text
        result = response.json()["result"]
        reply = json.loads(result["content"][0]["text"]) if "content" in result else result
        return int(response.headers[QUERIES_HEADER.decode()]), {
            "statements": response.headers[STATEMENTS_HEADER.decode()],
            "reply": reply,
        }

    return post


def remember(send: Any, n: int) -> str:
    arguments = {
        "category": "episodic",
        "content": f"Walked the harbour wall at dawn, number {n}.",
        "gist": f"Dawn walk on the harbour wall {n}",
        "tags": ["walks"],
    }
    _, sent = send(tool_call("taproot_remember", arguments))
    return str(sent["reply"]["memory_id"])


def test_a_request_without_a_tool_looks_up_only_its_token(send):
    for body in (INITIALIZE, {"jsonrpc": "2.0", "id": 3, "method": "tools/list"}):
        count, sent = send(body)
        assert count == TOKEN_LOOKUP, sent["statements"]


def test_remember_creates_a_memory_in_eight_statements_hint_included(send):
    remember(send, 0)  # the owner's first memory also makes their row of counts
    count, sent = send(
        tool_call(
            "taproot_remember",
            {
                "category": "episodic",
                "content": "Fed the harbour cat.",
                "gist": "Fed the cat",
                "tags": ["cats"],
            },
        )
    )
    # The duplicate check (one statement for content and gist), then the memory, its
    # recall entry, its tag rows, its token rows, the owner's live count and version, the
    # change recorded at that version, its vector. On PostgreSQL first the advisory lock
    # that makes identical calls (a retry racing the original) wait for each other;
    # SQLite writers wait already.
    retry_lock = 1 if is_postgres() else 0
    assert count == TOKEN_LOOKUP + retry_lock + 8, sent["statements"]


def test_recall_by_ids_reads_ranks_and_strengthens_in_as_few_statements(send):
    ids = [remember(send, n) for n in range(3)]
    count, sent = send(tool_call("taproot_recall", {"ids": ids[:2]}))
    assert sent["reply"]["count"] == 2
    # The memories asked for, read whole and ranked from what they hold (one query), then
    # the strengthening: one statement on PostgreSQL, two on SQLite (one per table, in one
    # transaction).
    strengthening = 1 if is_postgres() else 2
    assert count == TOKEN_LOOKUP + 1 + strengthening, sent["statements"]
