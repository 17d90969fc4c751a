"""The /mcp endpoint as HTTP: routing, Host/Origin guard, lifespan, connections, request log."""

import json
import time

import anyio
import httpx2
import pytest
from django.db import connection

from mcp_bridge.server import transport_security
from taproot_site.asgi import build_application
from tests.conftest import is_postgres
from tests.mcp.test_auth import INITIALIZE

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
    mcp = connect(token)
    mcp.reply("taproot_remember", {"category": "episodic", "content": secret, "gist": secret})
    deadline = time.monotonic() + 5
    expected = f"POST tools/call tool=taproot_remember user={user.pk} status=200 outcome=ok"
    while expected not in server.log() and time.monotonic() < deadline:
        time.sleep(0.05)
    log = server.log()
    assert expected in log
    assert f"POST initialize user={user.pk} status=200" in log
    assert "unique-marker" not in log
    assert token not in log


@on_server
@pytest.mark.server
def test_a_refused_token_is_logged_as_401_without_a_user(server, mcp_url):
    post(mcp_url, "definitely-not-valid")
    deadline = time.monotonic() + 5
    while "user=- status=401" not in server.log() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "user=- status=401" in server.log()
    assert "definitely-not-valid" not in server.log()


def other_connections() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        return cursor.fetchone()[0]


@on_server
@pytest.mark.server
def test_each_request_closes_its_database_connection(server, connect, token_for, user):
    if not is_postgres():
        pytest.skip("counts server connections in pg_stat_activity: PostgreSQL only")
    mcp = connect(token_for(user), mode="auto")
    for _ in range(10):
        mcp.reply("taproot_status")
        mcp.reply("taproot_recall", {"query": "anything"})
    deadline = time.monotonic() + 5
    while other_connections() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert other_connections() == 0


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
