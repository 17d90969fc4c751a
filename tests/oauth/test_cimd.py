"""Clients named by their Client ID Metadata Document (oauth.cimd), as Claude names itself.

A real HTTP server on loopback serves the documents (loopback http ids are allowed while
local clients are on, as under DEBUG); the OAuth endpoints run in this process, /mcp on a
live server with the real MCP client library.
"""

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from django.test import override_settings
from django.utils import timezone
from oauth2_provider.models import get_application_model

from tests.live_server import run_server
from tests.mcp.client import McpCaller, mcp_client
from tests.oauth.browser import query_of
from tests.oauth.conftest import CLAUDE_CALLBACK, Flow, Registered

pytestmark = pytest.mark.django_db(transaction=True)
Application = get_application_model()
PATH = "/oauth/mcp-oauth-client-metadata"


@dataclass
class Documents:
    """What the loopback server answers, path by path, and what was asked of it."""

    url: str
    answers: dict[str, tuple[int, dict[str, str], bytes]] = field(default_factory=dict)
    hits: list[str] = field(default_factory=list)

    def serve(self, path: str, document: Any, *, status: int = 200, **headers: str) -> str:
        body = document if isinstance(document, bytes) else json.dumps(document).encode()
        self.answers[path] = (status, {"Content-Type": "application/json", **headers}, body)
        return self.url + path

    def claude(self, path: str = PATH, **changes: Any) -> str:
        """Claude's published document, at a loopback address."""
        client_id = self.url + path
        document = {
            "client_id": client_id,
            "client_name": "Claude",
            "redirect_uris": [CLAUDE_CALLBACK],
            "grant_types": [
                "authorization_code",
                "refresh_token",
                "urn:ietf:params:oauth:grant-type:jwt-bearer",
            ],
            "token_endpoint_auth_method": "none",
            **changes,
        }
        return self.serve(path, document)


@pytest.fixture
def documents() -> Iterator[Documents]:
    served: Documents

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            served.hits.append(self.path)
            status, headers, body = served.answers.get(self.path, (404, {}, b"not found"))
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    served = Documents(url=f"http://127.0.0.1:{server.server_address[1]}")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        with override_settings(TAPROOT_ALLOW_LOOPBACK_CLIENTS=True):
            yield served
    finally:
        server.shutdown()
        server.server_close()


def flow_for(client: Any, client_id: str, redirect_uri: str = CLAUDE_CALLBACK) -> Flow:
    return Flow(client, Registered(client_id, None, redirect_uri, {}))


def test_claudes_document_walks_the_whole_flow(
    documents, logged_in, user, make_memory, tmp_path, portal
):
    client_id = documents.claude()
    make_memory(content="The lighthouse on the north shore.", gist="Alice's lighthouse")
    with run_server(tmp_dir=tmp_path, env={"TAPROOT_ALLOW_LOOPBACK_CLIENTS": "1"}) as server:
        mcp_url = f"{server.url}/mcp"
        with override_settings(TAPROOT_MCP_URL=mcp_url):
            flow = flow_for(logged_in, client_id)
            page = flow.consent_page()
            assert page.status_code == 200, page.content
            text = page.content.decode()
            assert "Claude" in text and documents.url.split("//")[1] in text
            code = flow.code()
            exchanged = flow.exchange(code)  # a public client: no secret
            assert exchanged.status_code == 200, exchanged.content
            tokens = exchanged.json()

        with portal.wrap_async_context_manager(
            mcp_client(mcp_url, tokens["access_token"], mode="legacy")
        ) as session:
            found = McpCaller(portal=portal, client=session).reply(
                "taproot_recall", {"query": "lighthouse"}
            )
        assert [r["gist"] for r in found["results"]] == ["Alice's lighthouse"]

        with override_settings(TAPROOT_MCP_URL=mcp_url):
            refreshed = flow.refresh(tokens["refresh_token"])
        assert refreshed.status_code == 200, refreshed.content
        assert refreshed.json()["refresh_token"] != tokens["refresh_token"]

    application = Application.objects.get(client_id=client_id)
    assert (application.name, application.client_type) == ("Claude", "public")
    assert application.authorization_grant_type == "authorization-code"
    assert documents.hits == [PATH]  # fetched once, then kept as its headers allow


def test_a_client_that_connects_again_stays_one_client(documents, logged_in, user):
    client_id = documents.claude()
    for _ in range(3):
        flow_for(logged_in, client_id).tokens()

    assert Application.objects.filter(client_id=client_id).count() == 1
    page = logged_in.get("/dashboard/clients/").content.decode()
    assert page.count('<article class="card client') == 1
    assert f"<code>{client_id}</code>" in page


def test_a_stale_document_is_fetched_again(documents, logged_in):
    client_id = documents.claude()
    documents.answers[PATH][1]["Cache-Control"] = "max-age=600"
    flow_for(logged_in, client_id).code()
    application = Application.objects.get(client_id=client_id)
    assert (
        timedelta(seconds=590)
        < application.cimd_expires_at - timezone.now()
        < timedelta(seconds=610)
    )

    documents.claude(client_name="Claude (renamed)")
    flow_for(logged_in, client_id).code()
    assert Application.objects.get(client_id=client_id).name == "Claude"  # still fresh
    Application.objects.filter(pk=application.pk).update(
        cimd_expires_at=timezone.now() - timedelta(seconds=1)
    )
    flow_for(logged_in, client_id).code()

    assert Application.objects.get(client_id=client_id).name == "Claude (renamed)"
    assert documents.hits == [PATH, PATH]


def refused_page(logged_in: Any, client_id: str, **overrides: Any) -> str:
    page = flow_for(logged_in, client_id).consent_page(**overrides)
    assert page.status_code == 400, page.content
    assert "location" not in page.headers  # shown, never sent to a redirect
    return page.content.decode()


def test_a_redirect_the_document_does_not_list_is_refused(documents, logged_in):
    client_id = documents.claude()
    text = refused_page(
        logged_in, client_id, redirect_uri="https://claude.com/api/mcp/auth_callback"
    )
    assert "is not one its description at" in text


@pytest.mark.parametrize(
    ("serve", "says"),
    [
        (
            lambda d: d.claude(client_id="https://claude.ai/oauth/mcp-oauth-client-metadata"),
            "its client_id is not the address it was fetched from",
        ),
        (
            lambda d: d.claude(client_name="Claude " + "x" * 10_000),
            "it is larger than the 8 KB a client description may be",
        ),
        (lambda d: d.url + "/missing", "the address did not answer with a document (404)"),
        (
            lambda d: d.serve("/html", b"<html>challenge</html>", **{"Content-Type": "text/html"}),
            "it is not a JSON document",
        ),
        (
            lambda d: d.claude(redirect_uris=["https://evil.example/callback"]),
            "is not on this server&#x27;s allowlist",
        ),
    ],
    ids=["another client_id", "oversized", "missing", "not JSON", "foreign redirect"],
)
def test_a_document_that_cannot_be_used_is_refused_saying_why(documents, logged_in, serve, says):
    client_id = serve(documents)

    text = refused_page(logged_in, client_id)

    assert "cannot be used" in text and says in text, text
    assert not Application.objects.filter(client_id=client_id).exists()


def test_a_loopback_document_is_not_fetched_when_local_clients_are_off(documents, logged_in):
    client_id = documents.claude()
    with override_settings(TAPROOT_ALLOW_LOOPBACK_CLIENTS=False):
        page = flow_for(logged_in, client_id).consent_page()
    assert page.status_code == 400
    assert documents.hits == []


def test_the_code_carries_the_issuer_and_goes_to_the_documents_callback(documents, logged_in):
    client_id = documents.claude()
    response = flow_for(logged_in, client_id).decide()
    assert response.status_code == 302
    assert response["Location"].startswith(CLAUDE_CALLBACK + "?")
    assert "iss" in query_of(response["Location"])


CLAUDE_ID = "https://claude.ai/oauth/mcp-oauth-client-metadata"
CLAUDE_DOCUMENT = {
    "client_id": CLAUDE_ID,
    "client_name": "Claude",
    "redirect_uris": [CLAUDE_CALLBACK],
    "grant_types": [
        "authorization_code",
        "refresh_token",
        "urn:ietf:params:oauth:grant-type:jwt-bearer",
    ],
    "token_endpoint_auth_method": "none",
}


def test_claudes_published_document_is_taken_with_its_extra_grant_set_aside():
    from oauth2_provider import cimd as toolkit

    from oauth.cimd import Fetcher

    with pytest.raises(toolkit.CIMDError, match="exactly one non-refresh grant type"):
        toolkit._build_application_kwargs(CLAUDE_DOCUMENT)  # the toolkit alone refuses it
    checked = Fetcher._checked(CLAUDE_ID, CLAUDE_DOCUMENT)

    assert checked["grant_types"] == ["authorization_code", "refresh_token"]
    kwargs = toolkit._build_application_kwargs(checked)
    assert (kwargs["name"], kwargs["authorization_grant_type"]) == ("Claude", "authorization-code")


@pytest.mark.parametrize("allowed", [True, False])
def test_an_https_id_on_a_loopback_address_is_never_fetched(allowed):
    from oauth2_provider import cimd as toolkit

    from oauth.cimd import Fetcher, refusal_of

    client_id = "https://127.0.0.1:9/oauth/client"
    with (
        override_settings(TAPROOT_ALLOW_LOOPBACK_CLIENTS=allowed),
        pytest.raises(toolkit.CIMDError, match="non-public address"),
    ):
        Fetcher().fetch(client_id)
    assert refusal_of(client_id) == "it lives on a private or loopback address"
