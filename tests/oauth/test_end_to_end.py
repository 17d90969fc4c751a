"""The whole connector flow with the MCP client library's own OAuth client, over real HTTP.

401 → resource metadata → authorization-server metadata → registration → login and
consent (a scripted browser: real form posts with CSRF) → code with `iss` → token with
`resource` → tool call as the consenting user → access token expiry → refresh (rotated)
→ tool call. Once as Claude registers (the exact body, a confidential
`client_secret_post` client) and once as a local public client, in both protocol eras.
"""

import hashlib
import json
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any
from urllib.parse import parse_qs

import httpx2
import pytest
from anyio.from_thread import BlockingPortal
from django.test import override_settings
from django.utils import timezone
from mcp.client import Client
from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken
from oauth2_provider.models import AccessToken, RefreshToken

from tests.live_server import run_server
from tests.mcp.client import MODERN_VERSION
from tests.mcp.tokens import make_access_token
from tests.oauth.browser import Browser, query_of
from tests.oauth.conftest import CLAUDE_CALLBACK, CLAUDE_REGISTRATION, Flow, Registered, register

pytestmark = [pytest.mark.server, pytest.mark.django_db(transaction=True)]

LOCAL_CALLBACK = "http://127.0.0.1:47615/callback"


@pytest.fixture(scope="module")
def oauth_server(django_db_setup: None, django_db_blocker: Any, tmp_path_factory: Any) -> Any:
    """A server with loopback clients on (a local client needs them) and room to register."""
    env = {"TAPROOT_ALLOW_LOOPBACK_CLIENTS": "1", "TAPROOT_REGISTRATION_LIMIT": "1000"}
    with (
        django_db_blocker.unblock(),
        run_server(tmp_dir=tmp_path_factory.mktemp("oauth-server"), env=env) as server,
    ):
        yield server


def checksum(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


class MemoryStorage:
    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client_info: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client_info = client_info


class Wire(httpx2.AsyncBaseTransport):
    """The network, recorded; for the Claude-shaped client it also registers exactly as
    Claude does (the SDK adds `scope` and `application_type` to its own body)."""

    def __init__(self, *, claude_shaped: bool) -> None:
        self.inner = httpx2.AsyncHTTPTransport()
        self.claude_shaped = claude_shaped
        self.exchanges: list[tuple[str, str, int]] = []
        self.registration_sent: dict[str, Any] | None = None
        self.token_requests: list[tuple[dict[str, str], dict[str, str]]] = []

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        path = request.url.path
        if request.method == "POST" and path == "/o/register/":
            sdk_body = json.loads(request.content)
            if self.claude_shaped:
                for key, value in CLAUDE_REGISTRATION.items():
                    assert sdk_body[key] == value, (key, sdk_body)
                request = httpx2.Request(
                    "POST",
                    request.url,
                    json=CLAUDE_REGISTRATION,
                    headers={"Accept": "application/json"},
                )
            self.registration_sent = json.loads(request.content)
        if request.method == "POST" and path == "/o/token/":
            form = {k: v[0] for k, v in parse_qs(request.content.decode()).items()}
            self.token_requests.append((form, dict(request.headers)))
        response = await self.inner.handle_async_request(request)
        self.exchanges.append((request.method, path, response.status_code))
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


class Connector:
    """An MCP client that connects with OAuth, as Claude or as a local public client."""

    def __init__(self, portal: BlockingPortal, server: Any, *, kind: str) -> None:
        self.portal = portal
        self.mcp_url = f"{server.url}/mcp"
        if kind == "claude":
            metadata = OAuthClientMetadata(
                client_name="Claude",
                redirect_uris=[CLAUDE_CALLBACK],
                grant_types=["authorization_code", "refresh_token"],
                response_types=["code"],
                token_endpoint_auth_method="client_secret_post",
            )
        else:
            metadata = OAuthClientMetadata(
                client_name="Local inspector",
                redirect_uris=[LOCAL_CALLBACK],
                grant_types=["authorization_code", "refresh_token"],
                response_types=["code"],
                token_endpoint_auth_method="none",
            )
        self.storage = MemoryStorage()
        self.browser = Browser(server.url, "alice", "pw-alice-123")
        self.authorization_urls: list[str] = []
        self.callbacks: list[str] = []
        self.provider = OAuthClientProvider(
            server_url=self.mcp_url,
            client_metadata=metadata,
            storage=self.storage,
            redirect_handler=self._redirect,
            callback_handler=self._callback,
        )
        self.wire = Wire(claude_shaped=kind == "claude")
        self.http = httpx2.AsyncClient(transport=self.wire, auth=self.provider, timeout=30)

    async def _redirect(self, url: str) -> None:
        self.authorization_urls.append(url)
        self.callbacks.append(await self.browser.authorize(url))

    async def _callback(self) -> AuthorizationCodeResult:
        params = query_of(self.callbacks[-1])
        return AuthorizationCodeResult(
            code=params["code"], state=params["state"], iss=params["iss"]
        )

    def session(self, mode: str) -> Any:
        client = Client(streamable_http_client(self.mcp_url, http_client=self.http), mode=mode)
        return self.portal.wrap_async_context_manager(client)

    def recall(self, client: Client, query: str) -> list[str]:
        result = self.portal.call(client.call_tool, "taproot_recall", {"query": query})
        body = json.loads(result.content[0].text)
        assert not result.is_error and body["status"] == "ok", body
        return [record["id"] for record in body["results"]]

    def close(self) -> None:
        self.portal.call(self.http.aclose)
        self.portal.call(self.browser.aclose)


def connect_expire_refresh(portal, server, *, kind, mode, alice, mine, theirs) -> Connector:
    connector = Connector(portal, server, kind=kind)
    mcp_url = connector.mcp_url
    try:
        with connector.session(mode) as client:
            # The first request met a 401 and the provider ran the whole flow.
            assert connector.wire.exchanges[:6] == [
                (connector.wire.exchanges[0][0], "/mcp", 401),
                ("GET", "/.well-known/oauth-protected-resource/mcp", 200),
                ("GET", "/.well-known/oauth-authorization-server", 200),
                ("POST", "/o/register/", 201),
                ("POST", "/o/token/", 200),
                (connector.wire.exchanges[0][0], "/mcp", 200),
            ], connector.wire.exchanges
            if mode == "auto":
                assert client.protocol_version == MODERN_VERSION
            else:
                assert client.protocol_version.startswith("2025-"), client.protocol_version

            if kind == "claude":
                assert connector.wire.registration_sent == CLAUDE_REGISTRATION
            assert connector.storage.client_info.token_endpoint_auth_method == (
                "client_secret_post" if kind == "claude" else "none"
            )
            (authorization_url,) = connector.authorization_urls
            asked = query_of(authorization_url)
            assert asked["resource"] == mcp_url
            assert asked["code_challenge_method"] == "S256"
            assert query_of(connector.callbacks[0])["iss"] == server.url

            form, headers = connector.wire.token_requests[0]
            assert form["grant_type"] == "authorization_code"
            assert form["resource"] == mcp_url
            if kind == "claude":
                assert form["client_secret"] and "authorization" not in headers
            else:
                assert "client_secret" not in form and "authorization" not in headers

            # The token acts for alice, on /mcp only: bob's memory is not there.
            assert connector.recall(client, "lighthouse") == [str(mine.id)]
            client_id = connector.storage.client_info.client_id
            row = AccessToken.objects.get(
                token_checksum=checksum(connector.storage.tokens.access_token)
            )
            assert (row.user, row.application.client_id, row.resource) == (
                alice,
                client_id,
                [mcp_url],
            )

            # The access token expires (30 days on), on the server and for the client.
            first = connector.storage.tokens
            AccessToken.objects.filter(pk=row.pk).update(
                expires=timezone.now() - timedelta(seconds=1)
            )
            connector.provider.context.token_expiry_time = time.time() - 1

            assert connector.recall(client, "lighthouse") == [str(mine.id)]
            form, _ = connector.wire.token_requests[-1]
            assert form["grant_type"] == "refresh_token"
            assert form["resource"] == mcp_url
            second = connector.storage.tokens
            assert second.refresh_token != first.refresh_token
            assert second.access_token != first.access_token
            old = RefreshToken.objects.get(token_checksum=checksum(first.refresh_token))
            assert old.revoked is not None
            assert connector.browser.consent_pages == 1
            assert str(theirs.id) not in connector.recall(client, "lighthouse keeper")
    finally:
        connector.close()
    return connector


@pytest.mark.parametrize("kind", ["claude", "public"])
def test_connector_flow_in_both_protocol_eras(
    oauth_server, portal, user, other_user, make_memory, kind
):
    mine = make_memory(content="The lighthouse on the north shore.", gist="Alice's lighthouse")
    theirs = make_memory(
        owner=other_user, content="Bob keeps the lighthouse keeper's log.", gist="Bob's lighthouse"
    )
    for mode in ["legacy", "auto"]:
        connect_expire_refresh(
            portal, oauth_server, kind=kind, mode=mode, alice=user, mine=mine, theirs=theirs
        )


def post_initialize(mcp_url: str, token: str) -> httpx2.Response:
    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "oauth-test", "version": "1"},
        },
    }
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream"}
    return httpx2.post(mcp_url, json=message, headers=headers, timeout=10)


def test_a_revoked_token_is_refused_at_mcp(oauth_server, client, user):
    mcp_url = f"{oauth_server.url}/mcp"
    with override_settings(TAPROOT_MCP_URL=mcp_url):
        body = register(client, CLAUDE_REGISTRATION).json()
        registered = Registered(body["client_id"], body["client_secret"], CLAUDE_CALLBACK, body)
        client.force_login(user)
        tokens = Flow(client, registered).tokens()
    assert post_initialize(mcp_url, tokens["access_token"]).status_code == 200
    revoke = httpx2.post(
        f"{oauth_server.url}/o/revoke_token/",
        data={
            "token": tokens["access_token"],
            "client_id": registered.client_id,
            "client_secret": registered.client_secret,
        },
        timeout=10,
    )
    assert revoke.status_code == 200
    refused = post_initialize(mcp_url, tokens["access_token"])
    assert refused.status_code == 401
    assert 'error="invalid_token"' in refused.headers["www-authenticate"]
    assert 'resource_metadata="' in refused.headers["www-authenticate"]


def test_a_token_bound_to_the_bare_origin_is_refused_at_mcp(oauth_server, user):
    for resource in [oauth_server.url, f"{oauth_server.url}/"]:
        token = make_access_token(user, resource=resource)
        refused = post_initialize(f"{oauth_server.url}/mcp", token)
        assert refused.status_code == 401
        assert 'error="invalid_token"' in refused.headers["www-authenticate"]


def test_a_replayed_code_is_refused_and_revokes_the_tokens_it_gave(
    oauth_server, portal, user, make_memory
):
    mine = make_memory(content="The lighthouse on the north shore.", gist="Alice's lighthouse")
    connector = Connector(portal, oauth_server, kind="claude")
    try:
        with connector.session("legacy") as client:
            assert connector.recall(client, "lighthouse") == [str(mine.id)]
        tokens = connector.storage.tokens
        client_info = connector.storage.client_info
        ((exchange, _),) = connector.wire.token_requests
        assert exchange["grant_type"] == "authorization_code"
    finally:
        connector.close()
    token_url = f"{oauth_server.url}/o/token/"
    mcp_url = f"{oauth_server.url}/mcp"
    assert post_initialize(mcp_url, tokens.access_token).status_code == 200

    # The code exchange again, exactly as the client sent it (RFC 6749 §4.1.2).
    replay = httpx2.post(token_url, data=exchange, timeout=10)
    assert replay.status_code == 400, replay.text
    assert replay.json()["error"] == "invalid_grant"

    refused = post_initialize(mcp_url, tokens.access_token)
    assert refused.status_code == 401
    assert 'error="invalid_token"' in refused.headers["www-authenticate"]
    refresh = httpx2.post(
        token_url,
        data={
            "grant_type": "refresh_token",
            "refresh_token": tokens.refresh_token,
            "client_id": client_info.client_id,
            "client_secret": client_info.client_secret,
        },
        timeout=10,
    )
    assert refresh.status_code == 400, refresh.text
    assert refresh.json()["error"] == "invalid_grant"
    assert "authorization code presented twice" in oauth_server.log()


def test_a_code_exchanged_many_times_at_once_leaves_no_token_alive(oauth_server, client, user):
    # Exchanges that race past the code check meet in the token transaction: at most one
    # is answered with tokens, the others invalid_grant, and those tokens are revoked.
    mcp_url = f"{oauth_server.url}/mcp"
    with override_settings(TAPROOT_MCP_URL=mcp_url):
        body = register(client, CLAUDE_REGISTRATION).json()
        registered = Registered(body["client_id"], body["client_secret"], CLAUDE_CALLBACK, body)
        client.force_login(user)
        flow = Flow(client, registered)
        code = flow.code()
    exchange = {
        "grant_type": "authorization_code",
        "code": code,
        "redirect_uri": CLAUDE_CALLBACK,
        "code_verifier": flow.verifier,
        "client_id": registered.client_id,
        "client_secret": registered.client_secret,
    }
    with ThreadPoolExecutor(max_workers=6) as pool:
        replies = list(
            pool.map(
                lambda _: httpx2.post(f"{oauth_server.url}/o/token/", data=exchange, timeout=30),
                range(6),
            )
        )
    granted = [reply for reply in replies if reply.status_code == 200]
    refused = [reply for reply in replies if reply.status_code != 200]
    assert len(granted) <= 1, [reply.text for reply in replies]
    for reply in refused:
        assert reply.status_code == 400, reply.text
        assert reply.headers["content-type"] == "application/json"
        assert reply.json()["error"] == "invalid_grant"
    for reply in granted:
        assert post_initialize(mcp_url, reply.json()["access_token"]).status_code == 401
    assert not AccessToken.objects.filter(user=user).exists()
    assert not RefreshToken.objects.filter(user=user, revoked__isnull=True).exists()


@pytest.mark.parametrize("how", ["revoked in the dashboard", "account deactivated"])
def test_a_30_day_token_stops_at_its_next_call_once_revoked_or_deactivated(
    oauth_server, client, user, how
):
    mcp_url = f"{oauth_server.url}/mcp"
    with override_settings(TAPROOT_MCP_URL=mcp_url):
        body = register(client, CLAUDE_REGISTRATION).json()
        registered = Registered(body["client_id"], body["client_secret"], CLAUDE_CALLBACK, body)
        client.force_login(user)
        tokens = Flow(client, registered).tokens()
    assert tokens["expires_in"] > 29 * 86400
    assert post_initialize(mcp_url, tokens["access_token"]).status_code == 200

    if how == "revoked in the dashboard":
        application = AccessToken.objects.get(
            token_checksum=checksum(tokens["access_token"])
        ).application
        assert client.post(f"/dashboard/clients/{application.pk}/revoke/").status_code == 302
    else:
        user.is_active = False
        user.save()

    refused = post_initialize(mcp_url, tokens["access_token"])
    assert refused.status_code == 401
    assert 'error="invalid_token"' in refused.headers["www-authenticate"]
