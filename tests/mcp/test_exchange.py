"""An ordinary /mcp request answered in its own task (mcp_bridge.exchange) gets exactly the
answer the SDK's stateless transport gives, and anything else still goes to the SDK."""

import json
from collections.abc import Callable
from typing import Any

import anyio
import httpx2
import pytest
from mcp.server.lowlevel.server import Server

from mcp_bridge.exchange import Exchange
from memories.models import Memory
from taproot_site.asgi import TaprootASGI, build_application
from tests.mcp.test_auth import INITIALIZE
from tests.mcp.test_endpoint import lifespan, tool_call
from tests.mcp.tokens import make_access_token

JSON_AND_SSE = "application/json, text/event-stream"


def sdk_only(app: TaprootASGI) -> TaprootASGI:
    """The application with the SDK's own stateless handler, as it was before Exchange."""
    manager = app.mcp.mcp.session_manager
    assert isinstance(manager._handle_stateless_request, Exchange)
    del manager._handle_stateless_request  # the class's method answers again
    return app


def request(body: Any, *, id: int = 7, **headers: str) -> tuple[bytes, dict[str, str]]:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    sent = {"Accept": JSON_AND_SSE, "Content-Type": "application/json", **headers}
    return raw, sent


def ordinary(user: Any, memory: Memory) -> list[tuple[bytes, dict[str, str]]]:
    """Requests the Exchange answers itself: every kind of answer a tool call, another
    method or a failure gives."""
    known, unknown = str(memory.id), "00000000-0000-4000-8000-000000000000"
    return [
        request(tool_call("taproot_recall", {"ids": [unknown]}, id=3)),
        request(tool_call("taproot_recall", {"ids": known[:8], "limit": "two"})),
        request(tool_call("taproot_forget", {"memory_id": unknown, "action": "archive"})),
        request(tool_call("taproot_remember", {"category": "nonsense", "content": "x"})),
        request(tool_call("taproot_recall", {"ids": [unknown], "surprise": 1}, id=9)),
        request(tool_call("taproot_nothing")),
        request({"jsonrpc": "2.0", "id": "a", "method": "tools/call", "params": {}}),
        request({"jsonrpc": "2.0", "id": 4, "method": "tools/call"}),
        request({"jsonrpc": "2.0", "id": 5, "method": "tools/list"}),
        request(
            {"jsonrpc": "2.0", "id": 6, "method": "tools/list"},
            **{"Mcp-Protocol-Version": "2025-06-18"},
        ),
        request({"jsonrpc": "2.0", "id": 6, "method": "prompts/list"}),
        request({"jsonrpc": "2.0", "id": 6, "method": "resources/list"}),
        request({"jsonrpc": "2.0", "id": 6, "method": "ping"}),
        request({"jsonrpc": "2.0", "id": 6, "method": "no/such/method"}),
        request({"jsonrpc": "2.0", "id": 8, "method": "tools/list"}, Accept="application/json"),
        request({"jsonrpc": "2.0", "id": 8, "method": "tools/list"}, Accept="*/*"),
        request(
            {"jsonrpc": "2.0", "id": 8, "method": "tools/list"},
            **{"Content-Type": "application/json; charset=utf-8"},
        ),
    ]


def others() -> list[tuple[bytes, dict[str, str]]]:
    """Requests the SDK's path answers: refused headers, bodies that are not one JSON-RPC
    request, notifications, initialize."""
    tools_list = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    return [
        request(INITIALIZE),
        request({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        request({"jsonrpc": "2.0", "id": 1, "result": {}}),
        request(b"{not json"),
        request(b'{"jsonrpc": "1.0", "id": 1, "method": "tools/list"}'),
        request([tools_list, tools_list]),
        request(tools_list, Accept="text/event-stream"),
        request(tools_list, Accept="text/html"),
        request(tools_list, **{"Content-Type": "text/plain"}),
        request(tools_list, Host="evil.example"),
        request(tools_list, Origin="https://evil.example"),
    ]


async def answers(
    app: TaprootASGI, token: str, sent: list[tuple[bytes, dict[str, str]]]
) -> list[tuple[int, list[tuple[str, str]], bytes]]:
    found = []
    transport = httpx2.ASGITransport(app=app)
    client = httpx2.AsyncClient(transport=transport, base_url="http://127.0.0.1")
    async with lifespan(app), client:
        for body, headers in sent:
            response = await client.post(
                "/mcp", content=body, headers={**headers, "Authorization": f"Bearer {token}"}
            )
            found.append((response.status_code, sorted(response.headers.items()), response.content))
    return found


@pytest.fixture
def answered(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The ids of the requests Exchange answered itself, in turn."""
    ids: list[Any] = []
    answer = Exchange.answer

    async def noted(self: Exchange, message: Any, *args: Any) -> Any:
        ids.append(message.id)
        return await answer(self, message, *args)

    monkeypatch.setattr(Exchange, "answer", noted)
    return ids


@pytest.fixture
def memory(make_memory: Callable[..., Memory]) -> Memory:
    return make_memory(content="We went to Lisbon.", gist="Lisbon")


@pytest.mark.django_db(transaction=True)
def test_ordinary_requests_get_the_sdks_answers_byte_for_byte(answered, settings, user, memory):
    token = make_access_token(user, resource=settings.TAPROOT_MCP_URL)
    sent = ordinary(user, memory)
    ours = anyio.run(answers, build_application(), token, sent)
    assert len(answered) == len(sent)  # every one of them answered here
    answered.clear()
    sdks = anyio.run(answers, sdk_only(build_application()), token, sent)
    assert answered == []
    assert [status for status, _, _ in ours] == [status for status, _, _ in sdks]
    assert ours == sdks
    bodies = [json.loads(body) for _, _, body in ours]
    # What they are: tool replies, refusals, protocol errors, lists.
    assert json.loads(bodies[0]["result"]["content"][0]["text"])["status"] == "ok"
    assert bodies[2]["result"]["isError"] is True
    assert bodies[5]["result"]["isError"] is True  # an unknown tool is a tool error
    assert bodies[6]["error"]["code"] == -32602
    assert bodies[8]["result"]["tools"][0]["name"] == "taproot_reflect"
    assert bodies[11]["error"]["code"] == -32601
    assert bodies[12] == {"jsonrpc": "2.0", "id": 6, "result": {}}


@pytest.mark.django_db(transaction=True)
def test_a_handler_that_fails_unexpectedly_gets_the_dispatchers_error(
    monkeypatch, settings, user, memory
):
    token = make_access_token(user, resource=settings.TAPROOT_MCP_URL)
    original = Server.get_request_handler

    def failing(self: Server[Any], method: str) -> Any:
        entry = original(self, method)
        if entry is None or method != "tools/list":
            return entry

        async def fail(ctx: Any, params: Any) -> Any:
            raise RuntimeError("the disk is on fire")

        return type(entry)(entry.params_type, fail)

    monkeypatch.setattr(Server, "get_request_handler", failing)
    sent = [request({"jsonrpc": "2.0", "id": 5, "method": "tools/list"})]
    ours = anyio.run(answers, build_application(), token, sent)
    sdks = anyio.run(answers, sdk_only(build_application()), token, sent)
    assert ours == sdks
    assert json.loads(ours[0][2]) == {
        "jsonrpc": "2.0",
        "id": 5,
        "error": {"code": 0, "message": "the disk is on fire"},
    }


@pytest.mark.django_db(transaction=True)
def test_other_requests_are_left_to_the_sdk_with_their_body(answered, settings, user):
    token = make_access_token(user, resource=settings.TAPROOT_MCP_URL)
    sent = others()
    ours = anyio.run(answers, build_application(), token, sent)
    assert answered == []
    sdks = anyio.run(answers, sdk_only(build_application()), token, sent)
    assert ours == sdks
    statuses = [status for status, _, _ in ours]
    assert statuses == [200, 202, 202, 400, 400, 400, 406, 406, 400, 421, 403]
    assert json.loads(ours[0][2])["result"]["serverInfo"]["name"] == "taproot"
