import base64
import hashlib
import json
import secrets
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import pytest
from django.conf import settings
from django.core.cache import cache
from django.test import Client

from tests.oauth.browser import query_of, read_form

CLAUDE_CALLBACK = "https://claude.ai/api/mcp/auth_callback"
CLAUDE_REGISTRATION = {
    "redirect_uris": [CLAUDE_CALLBACK],
    "token_endpoint_auth_method": "client_secret_post",
    "grant_types": ["authorization_code", "refresh_token"],
    "response_types": ["code"],
    "client_name": "Claude",
}
LOOPBACK_CALLBACK = "http://127.0.0.1:33418/callback"
PUBLIC_REGISTRATION = {
    "redirect_uris": [LOOPBACK_CALLBACK],
    "token_endpoint_auth_method": "none",
    "grant_types": ["authorization_code", "refresh_token"],
    "response_types": ["code"],
    "client_name": "Local inspector",
}
STATE = "state-Zx81"


def challenge_of(verifier: str) -> str:
    digest = hashlib.sha256(verifier.encode()).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


@pytest.fixture(autouse=True)
def _fresh_cache(db: None) -> None:
    # Registration throttling counts in the database cache, which test flushes keep.
    cache.clear()


@dataclass
class Registered:
    client_id: str
    client_secret: str | None
    redirect_uri: str
    body: dict[str, Any]


def register(client: Client, body: dict[str, Any], **extra: Any) -> Any:
    return client.post(
        "/o/register/", data=json.dumps(body), content_type="application/json", **extra
    )


@pytest.fixture
def claude_client(db: None) -> Registered:
    response = register(Client(), CLAUDE_REGISTRATION)
    assert response.status_code == 201, response.content
    body = response.json()
    return Registered(body["client_id"], body["client_secret"], CLAUDE_CALLBACK, body)


@pytest.fixture
def public_client(db: None) -> Registered:
    response = register(Client(), PUBLIC_REGISTRATION)
    assert response.status_code == 201, response.content
    body = response.json()
    return Registered(body["client_id"], None, LOOPBACK_CALLBACK, body)


class Flow:
    """Drives the authorization-code flow through Django's test client, as a browser would."""

    def __init__(self, client: Client, registered: Registered) -> None:
        self.client = client
        self.registered = registered
        self.verifier = secrets.token_urlsafe(48)

    def params(self, **overrides: Any) -> dict[str, str]:
        params = {
            "response_type": "code",
            "client_id": self.registered.client_id,
            "redirect_uri": self.registered.redirect_uri,
            "state": STATE,
            "code_challenge": challenge_of(self.verifier),
            "code_challenge_method": "S256",
            "scope": "mcp",
            "resource": settings.TAPROOT_MCP_URL,
        }
        params.update(overrides)
        return {key: value for key, value in params.items() if value is not None}

    def consent_page(self, **overrides: Any) -> Any:
        return self.client.get(f"/o/authorize/?{urlencode(self.params(**overrides))}")

    def decide(self, *, allow: bool = True, tamper: dict[str, str] | None = None, **overrides: Any):
        """Open the consent page, then press Allow or Deny; the response to that POST."""
        page = self.consent_page(**overrides)
        assert page.status_code == 200, page.content
        action, fields = read_form(page.content.decode(), "authorizationForm")
        fields.update(tamper or {})
        if allow:
            fields["allow"] = "Authorize"
        return self.client.post(action or page.wsgi_request.get_full_path(), fields)

    def code(self, **overrides: Any) -> str:
        response = self.decide(**overrides)
        assert response.status_code == 302, response.content
        params = query_of(response["Location"])
        assert "code" in params, params
        return params["code"]

    def token_request(self, grant: dict[str, str], **extra: Any) -> Any:
        data = {"client_id": self.registered.client_id, **grant}
        if self.registered.client_secret:
            data["client_secret"] = self.registered.client_secret
        data = {key: value for key, value in data.items() if value is not None}
        return self.client.post("/o/token/", data, **extra)

    def exchange(self, code: str, **overrides: Any) -> Any:
        grant = {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": self.registered.redirect_uri,
            "code_verifier": self.verifier,
            "resource": settings.TAPROOT_MCP_URL,
            **overrides,
        }
        return self.token_request(grant)

    def refresh(self, refresh_token: str, **overrides: Any) -> Any:
        grant = {"grant_type": "refresh_token", "refresh_token": refresh_token, **overrides}
        return self.token_request(grant)

    def tokens(self) -> dict[str, Any]:
        response = self.exchange(self.code())
        assert response.status_code == 200, response.content
        return response.json()


@pytest.fixture
def logged_in(client: Client, user: Any) -> Client:
    client.force_login(user)
    return client


@pytest.fixture
def claude_flow(logged_in: Client, claude_client: Registered) -> Flow:
    return Flow(logged_in, claude_client)


@pytest.fixture
def public_flow(logged_in: Client, public_client: Registered) -> Flow:
    return Flow(logged_in, public_client)
