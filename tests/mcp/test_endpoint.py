"""The /mcp endpoint as HTTP: routing, Host/Origin guard, lifespan, connections, request log."""

import json
import re
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx2
import pytest
from asgiref.sync import SyncToAsync
from django.db import connection
from django.db.backends.sqlite3.base import DatabaseWrapper as SQLiteDatabaseWrapper

from mcp_bridge import database
from mcp_bridge import trips as trips_module
from mcp_bridge.server import transport_security
from mcp_bridge.trips import on_thread
from taproot_site.asgi import TaprootASGI, build_application
from tests.conftest import is_postgres
from tests.live_server import run_server
from tests.mcp.test_auth import INITIALIZE
from tests.mcp.tokens import make_access_token

on_server = pytest.mark.django_db(transaction=True)
ACCEPT = {"Accept": "application/json, text/event-stream"}


def post(url: str, token: str | None = None, **headers: str) -> httpx2.Response:
    sent = dict(ACCEPT)
    if token:
        sent["Authorization"] = f"Bearer {token}"
    sent.update(headers)
    return httpx2.post(url, json=INITIALIZE, headers=sent, timeout=10)


@on_server
@pytest.mark.server
def test_mcp_is_served_at_exactly_mcp_without_a_slash_redirect(server, mcp_url, user, token_for):
    token = token_for(user)
    assert post(mcp_url, token).status_code == 200
    slashed = post(f"{mcp_url}/", token)
    assert slashed.status_code == 404
    assert "location" not in slashed.headers


@on_server
@pytest.mark.server
def test_answers_are_plain_json_and_no_session_is_kept(server, mcp_url, user, token_for):
    response = post(mcp_url, token_for(user))
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
    assert "mcp-session-id" not in response.headers
    assert response.json()["result"]["serverInfo"]["name"] == "taproot"


@on_server
@pytest.mark.server
def test_get_is_refused_at_once_rather_than_held_open_as_an_idle_stream(
    server, mcp_url, user, token_for
):
    headers = {"Accept": "text/event-stream", "Authorization": f"Bearer {token_for(user)}"}
    for era in ({}, {"MCP-Protocol-Version": "2026-07-28"}):
        response = httpx2.get(mcp_url, headers={**headers, **era}, timeout=5)
        assert response.status_code == 405, era
        assert response.headers["allow"] == "POST", era
    assert "Method Not Allowed" in httpx2.get(mcp_url, headers=headers, timeout=5).text


@on_server
@pytest.mark.server
def test_get_without_a_token_gets_the_sign_in_challenge(server, mcp_url):
    response = httpx2.get(mcp_url, headers={"Accept": "text/event-stream"}, timeout=5)
    assert response.status_code == 401
    assert "resource_metadata=" in response.headers["www-authenticate"]


@on_server
@pytest.mark.server
def test_a_host_outside_the_allowlist_is_refused(server, mcp_url, user, token_for):
    response = post(mcp_url, token_for(user), Host="attacker.example")
    assert response.status_code == 421


@on_server
@pytest.mark.server
def test_origins_are_limited_to_the_site_and_claude(server, mcp_url, user, token_for):
    token = token_for(user)
    assert post(mcp_url, token, Origin="https://evil.example").status_code == 403
    assert post(mcp_url, token, Origin="https://claude.ai").status_code == 200
    assert post(mcp_url, token, Origin="https://claude.com").status_code == 200
    assert post(mcp_url, token, Origin=server.url).status_code == 200


def test_the_allowlist_comes_from_the_public_url_and_allowed_hosts(settings):
    settings.TAPROOT_PUBLIC_URL = "https://memory.example.org"
    settings.ALLOWED_HOSTS = ["memory.example.org", "10.0.0.5", ".example.net"]
    guard = transport_security()
    assert guard.enable_dns_rebinding_protection
    assert "memory.example.org" in guard.allowed_hosts
    assert "10.0.0.5:*" in guard.allowed_hosts
    assert not any("example.net" in host for host in guard.allowed_hosts)
    assert guard.allowed_origins == [
        "https://memory.example.org",
        "https://claude.ai",
        "https://claude.com",
    ]


def test_allowing_every_host_turns_the_guard_off(settings):
    settings.ALLOWED_HOSTS = ["*"]
    assert not transport_security().enable_dns_rebinding_protection


def test_without_lifespan_the_endpoint_says_how_to_start_it():
    async def post_without_lifespan() -> httpx2.Response:
        transport = httpx2.ASGITransport(app=build_application())
        async with httpx2.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            return await client.post("/mcp", json=INITIALIZE, headers=ACCEPT)

    response = anyio.run(post_without_lifespan)
    assert response.status_code == 503
    assert "--lifespan on" in response.json()["error"]


@on_server
@pytest.mark.server
def test_the_request_log_names_method_tool_user_and_status_but_no_text_or_token(
    server, connect, token_for, user
):
    token = token_for(user)
    secret = "The user's locker code is 4417-unique-marker"
    start = server.log_position()
    mcp = connect(token)
    mcp.reply("taproot_remember", {"category": "episodic", "content": secret, "gist": secret})
    expected = f"POST tools/call tool=taproot_remember user={user.pk} status=200 outcome=ok"
    log = server.wait_for_log(expected, since=start)
    assert re.search(re.escape(expected) + r" \d+\.\dms$", log, re.MULTILINE), log[-2000:]
    assert f"POST initialize user={user.pk} status=200" in log
    assert "unique-marker" not in log
    assert token not in log


@on_server
@pytest.mark.server
def test_a_refused_token_is_logged_as_401_without_a_user(server, mcp_url):
    # Only what this request logged: earlier tests left 401 lines in the server's log.
    start = server.log_position()
    assert post(mcp_url, "definitely-not-valid").status_code == 401
    log = server.wait_for_log("status=401", since=start)
    assert re.fullmatch(r"\S+ \S+ INFO taproot\.mcp POST - user=- status=401 \d+\.\dms\n", log), log


@asynccontextmanager
async def lifespan(app: TaprootASGI) -> AsyncIterator[None]:
    """Run the ASGI lifespan protocol as uvicorn does with `--lifespan on`."""
    to_app, app_receives = anyio.create_memory_object_stream[dict[str, Any]](2)
    app_sends, from_app = anyio.create_memory_object_stream[dict[str, Any]](2)
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(app, {"type": "lifespan"}, app_receives.receive, app_sends.send)
        await to_app.send({"type": "lifespan.startup"})
        assert (await from_app.receive())["type"] == "lifespan.startup.complete"
        yield
        await to_app.send({"type": "lifespan.shutdown"})
        assert (await from_app.receive())["type"] == "lifespan.shutdown.complete"


NEW_MEMORY = {"category": "episodic", "content": "We went to Lisbon.", "gist": "A trip to Lisbon"}


def tool_call(name: str, arguments: dict[str, Any] | None = None, id: int = 2) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": id,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments or {}},
    }


async def post_in_process(
    app: TaprootASGI, bodies: list[dict[str, Any]], token: str | None
) -> list[httpx2.Response]:
    """POST each body to /mcp of an application running in this process."""
    headers = {**ACCEPT, **({"Authorization": f"Bearer {token}"} if token else {})}
    transport = httpx2.ASGITransport(app=app)
    async with httpx2.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        return [await client.post("/mcp", json=body, headers=headers) for body in bodies]


@pytest.mark.django_db(transaction=True)
def test_a_tool_call_makes_two_trips_off_the_event_loop_and_nothing_else_does(
    monkeypatch, settings, user
):
    """The token check, then the tool's service call: each one trip (mcp_bridge.trips)
    from the event loop to a database thread (mcp_bridge.database); between them, a
    recall's query or a new memory is embedded on a thread of its own
    (mcp_bridge.embedding). Nothing else in a request leaves the loop (no request
    signals, no second user lookup, no sync_to_async), and a request without a token
    makes no trip at all."""
    token = make_access_token(user, resource=settings.TAPROOT_MCP_URL)
    trips: list[str] = []
    hop, other_hop = on_thread, SyncToAsync.__call__

    async def noted(pool: Any, function: Any, *args: Any, **kwargs: Any) -> Any:
        work = args[0] if function is database.in_database_thread else function
        trips.append(getattr(work, "__name__", repr(work)))
        return await hop(pool, function, *args, **kwargs)

    async def other(self: SyncToAsync[Any, Any], *args: Any, **kwargs: Any) -> Any:
        trips.append(f"sync_to_async({getattr(self.func, '__name__', repr(self.func))})")
        return await other_hop(self, *args, **kwargs)

    async def requests() -> list[tuple[int, list[str]]]:
        app = build_application()
        seen = []
        async with lifespan(app):
            monkeypatch.setattr(trips_module, "on_thread", noted)
            monkeypatch.setattr(SyncToAsync, "__call__", other)
            for body, sent_token in [
                (INITIALIZE, token),
                (tool_call("taproot_status"), token),
                (tool_call("taproot_recall", {"query": "anything"}), token),
                (tool_call("taproot_remember", NEW_MEMORY), token),
                (tool_call("taproot_status"), None),
            ]:
                trips.clear()
                (response,) = await post_in_process(app, [body], sent_token)
                seen.append((response.status_code, list(trips)))
            monkeypatch.undo()
        return seen

    assert anyio.run(requests) == [
        (200, ["find_access_token"]),
        (200, ["find_access_token", "call"]),
        (200, ["find_access_token", "embed_query", "call"]),
        (200, ["find_access_token", "vectors_for", "call"]),
        (401, []),
    ]


@pytest.mark.django_db(transaction=True)
def test_sqlite_connections_are_kept_from_one_request_to_the_next(monkeypatch, settings, user):
    """Each database thread opens its SQLite connection once (and runs its PRAGMAs
    once), however many requests it serves."""
    if is_postgres():
        pytest.skip("PostgreSQL lends pooled connections instead (see the pool tests)")
    token = make_access_token(user, resource=settings.TAPROOT_MCP_URL)
    opened: list[threading.Thread] = []
    open_connection = SQLiteDatabaseWrapper.get_new_connection

    def noted(self: SQLiteDatabaseWrapper, params: dict[str, Any]) -> Any:
        opened.append(threading.current_thread())
        return open_connection(self, params)

    monkeypatch.setattr(SQLiteDatabaseWrapper, "get_new_connection", noted)

    async def requests() -> list[int]:
        app = build_application()
        async with lifespan(app):
            opened.clear()
            responses = await post_in_process(app, [tool_call("taproot_status")] * 30, token)
        return [response.status_code for response in responses]

    assert anyio.run(requests) == [200] * 30
    # 60 trips to the database threads (a token check and a call per request), served by
    # a connection per thread used.
    assert 1 <= len(opened) <= database.thread_count()
    assert len(opened) == len(set(opened))


def connection_states(application_name: str | None = None) -> list[str]:
    """States of the other connections to the test database (the servers' connections)."""
    sql = (
        "SELECT state FROM pg_stat_activity "
        "WHERE datname = current_database() AND pid <> pg_backend_pid()"
    )
    params: list[str] = []
    if application_name:
        sql += " AND application_name = %s"
        params.append(application_name)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [state for (state,) in cursor.fetchall()]


def settle(states: Callable[[], list[str]], done: Callable[[list[str]], bool]) -> list[str]:
    """The states once `done` holds, or after 5 seconds (a request may still be ending)."""
    deadline = time.monotonic() + 5
    while not done(found := states()) and time.monotonic() < deadline:
        time.sleep(0.05)
    return found


@on_server
@pytest.mark.server
@pytest.mark.parametrize("pool_size", [0, 2])
def test_each_request_gives_its_connection_back(tmp_path, user, pool_size):
    """Without a pool a request closes its connection; with one it returns it, idle."""
    if not is_postgres():
        pytest.skip("counts server connections in pg_stat_activity: PostgreSQL only")
    name = f"taproot-test-pool-{pool_size}"  # tells this server's connections apart
    env = {"TAPROOT_DB_POOL_SIZE": str(pool_size), "PGAPPNAME": name}
    with run_server(tmp_dir=tmp_path, env=env) as server:
        token = make_access_token(user, resource=f"{server.url}/mcp")
        # More requests than the pool holds: one that kept its connection would starve
        # the rest until the pool's timeout.
        for _ in range(10):
            assert post(f"{server.url}/mcp", token).status_code == 200
        states = settle(
            lambda: connection_states(name),
            lambda found: len(found) <= pool_size and set(found) <= {"idle"},
        )
        if pool_size:
            assert 1 <= len(states) <= pool_size
            assert set(states) == {"idle"}  # none left inside a transaction
        else:
            assert states == []


@on_server
@pytest.mark.server
def test_envelope_faults_get_the_sdks_answers_never_a_server_error(
    server, mcp_url, user, token_for
):
    headers = {
        **ACCEPT,
        "Authorization": f"Bearer {token_for(user)}",
        "Content-Type": "application/json",
    }

    def send(body: str) -> httpx2.Response:
        return httpx2.post(mcp_url, content=body, headers=headers, timeout=10)

    not_json = send("not json")
    assert not_json.status_code == 400
    assert not_json.json()["error"]["code"] == -32700
    call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call"}
    list_arguments = send(
        json.dumps({**call, "params": {"name": "taproot_recall", "arguments": [1]}})
    )
    assert list_arguments.status_code == 200
    assert list_arguments.json()["error"]["code"] == -32602
    unknown = send(json.dumps({**call, "params": {"name": "taproot_nothing", "arguments": {}}}))
    assert unknown.json()["result"]["isError"] is True
    for method in ("PUT", "DELETE"):
        assert httpx2.request(method, mcp_url, headers=headers, timeout=10).status_code == 405
    assert "Traceback" not in server.log()
