import time

import pytest
from django.contrib.auth.hashers import check_password
from django.db import connection
from django.test import override_settings
from oauth2_provider.models import Application

from tests.oauth.conftest import (
    CLAUDE_CALLBACK,
    CLAUDE_REGISTRATION,
    LOOPBACK_CALLBACK,
    PUBLIC_REGISTRATION,
    register,
)

pytestmark = pytest.mark.django_db


def test_claude_registration_body_gets_a_confidential_client_that_echoes_its_method(client):
    before = int(time.time())
    response = register(client, CLAUDE_REGISTRATION)
    assert response.status_code == 201
    body = response.json()
    assert body["token_endpoint_auth_method"] == "client_secret_post"
    assert body["client_name"] == "Claude"
    assert body["redirect_uris"] == [CLAUDE_CALLBACK]
    assert body["grant_types"] == ["authorization_code", "refresh_token"]
    assert body["response_types"] == ["code"]
    assert body["client_secret_expires_at"] == 0
    assert before - 1 <= body["client_id_issued_at"] <= int(time.time()) + 1
    assert body["registration_client_uri"] == (
        f"http://127.0.0.1:8000/o/register/{body['client_id']}/"
    )
    application = Application.objects.get(client_id=body["client_id"])
    assert application.client_type == "confidential"
    assert application.registration_source == "dcr"
    assert application.user is None


def test_client_secrets_are_stored_hashed(client):
    body = register(client, CLAUDE_REGISTRATION).json()
    stored = Application.objects.get(client_id=body["client_id"]).client_secret
    assert stored != body["client_secret"]
    assert check_password(body["client_secret"], stored)


def test_client_secret_basic_is_echoed_too(client):
    response = register(
        client, {**CLAUDE_REGISTRATION, "token_endpoint_auth_method": "client_secret_basic"}
    )
    assert response.status_code == 201
    assert response.json()["token_endpoint_auth_method"] == "client_secret_basic"


def test_the_claude_com_callback_is_allowed(client):
    body = {**CLAUDE_REGISTRATION, "redirect_uris": ["https://claude.com/api/mcp/auth_callback"]}
    assert register(client, body).status_code == 201


def test_public_client_gets_no_secret(client):
    response = register(client, PUBLIC_REGISTRATION)
    assert response.status_code == 201
    body = response.json()
    assert body["token_endpoint_auth_method"] == "none"
    assert "client_secret" not in body
    assert "client_secret_expires_at" not in body
    assert Application.objects.get(client_id=body["client_id"]).client_type == "public"


@pytest.mark.parametrize(
    "redirect_uri",
    [
        "http://127.0.0.1:6274/oauth/callback",
        "http://localhost:6274/oauth/callback",
        "http://[::1]:51234/cb",
        "http://127.0.0.1/cb",
    ],
)
@override_settings(TAPROOT_ALLOW_LOOPBACK_CLIENTS=True)
def test_loopback_redirects_are_allowed_when_loopback_clients_are_on(client, redirect_uri):
    body = {**PUBLIC_REGISTRATION, "redirect_uris": [redirect_uri]}
    assert register(client, body).status_code == 201


@override_settings(TAPROOT_ALLOW_LOOPBACK_CLIENTS=False)
def test_loopback_redirect_is_refused_when_loopback_clients_are_off(client):
    response = register(client, PUBLIC_REGISTRATION)
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_redirect_uri"
    assert "TAPROOT_ALLOW_LOOPBACK_CLIENTS" in response.json()["error_description"]
    assert not Application.objects.exists()


@pytest.mark.parametrize(
    "redirect_uri",
    [
        "https://attacker.example/callback",
        "https://claude.ai/api/mcp/auth_callback/../../evil",
        "https://claude.ai.evil.example/api/mcp/auth_callback",
        "http://claude.ai/api/mcp/auth_callback",
        "https://claude.ai/api/mcp/auth_callback?next=https://evil.example",
        "http://192.168.1.20:8080/callback",
        "http://user@127.0.0.1:8080/callback",
    ],
)
def test_redirects_off_the_allowlist_are_refused(client, redirect_uri):
    response = register(client, {**CLAUDE_REGISTRATION, "redirect_uris": [redirect_uri]})
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_redirect_uri"
    assert not Application.objects.exists()


def test_one_bad_redirect_among_good_ones_refuses_the_registration(client):
    uris = [CLAUDE_CALLBACK, "https://attacker.example/callback"]
    response = register(client, {**CLAUDE_REGISTRATION, "redirect_uris": uris})
    assert response.status_code == 400
    assert not Application.objects.exists()


def test_a_refused_redirect_uri_is_quoted_only_by_its_start(client):
    uri = "https://attacker.example/" + "x" * 1_000_000
    response = register(client, {**CLAUDE_REGISTRATION, "redirect_uris": [uri]})
    assert response.status_code == 400
    description = response.json()["error_description"]
    assert "(1,000,025 characters)" in description
    assert len(description) < 400


@pytest.mark.parametrize(
    "redirect_uri",
    [
        "javascript:alert(document.cookie)",
        "JavaScript://claude.ai/%0aalert(1)",
        "data:text/html,<script>alert(1)</script>",
        f"{CLAUDE_CALLBACK}#fragment",
        f"{LOOPBACK_CALLBACK}#",
    ],
)
def test_script_and_fragment_redirects_are_refused(client, redirect_uri):
    response = register(client, {**PUBLIC_REGISTRATION, "redirect_uris": [redirect_uri]})
    assert response.status_code == 400
    body = response.json()
    assert body["error"] == "invalid_redirect_uri"
    assert (
        redirect_uri.split(":")[0] in body["error_description"]
        or "fragment" in body["error_description"]
    )
    assert not Application.objects.exists()


@override_settings(TAPROOT_EXTRA_REDIRECT_URIS=["https://agent.example.org/oauth/callback"])
def test_operators_can_add_exact_redirect_uris(client):
    body = {**CLAUDE_REGISTRATION, "redirect_uris": ["https://agent.example.org/oauth/callback"]}
    assert register(client, body).status_code == 201
    body["redirect_uris"] = ["https://agent.example.org/oauth/callback2"]
    assert register(client, body).status_code == 400


@pytest.mark.parametrize(
    ("change", "error"),
    [
        ({"grant_types": ["client_credentials"]}, "invalid_client_metadata"),
        ({"grant_types": ["authorization_code", "implicit"]}, "invalid_client_metadata"),
        ({"grant_types": ["refresh_token"]}, "invalid_client_metadata"),
        ({"grant_types": [["authorization_code"]]}, "invalid_client_metadata"),
        ({"grant_types": "authorization_code"}, "invalid_client_metadata"),
        ({"response_types": ["token"]}, "invalid_client_metadata"),
        ({"response_types": ["code", "token"]}, "invalid_client_metadata"),
        ({"token_endpoint_auth_method": "private_key_jwt"}, "invalid_client_metadata"),
        ({"redirect_uris": []}, "invalid_client_metadata"),
        ({"redirect_uris": CLAUDE_CALLBACK}, "invalid_redirect_uri"),
        ({"client_name": "x" * 300}, "invalid_client_metadata"),
        ({"client_name": None}, "invalid_client_metadata"),
        ({"client_name": 5}, "invalid_client_metadata"),
        ({"client_name": ["Claude"]}, "invalid_client_metadata"),
    ],
)
def test_metadata_the_server_cannot_honour_is_refused(client, change, error):
    response = register(client, {**CLAUDE_REGISTRATION, **change})
    assert response.status_code == 400
    assert response.json()["error"] == error
    assert not Application.objects.exists()


@pytest.mark.parametrize("payload", ["not json", "[1, 2]", "", "[" * 100_000, b"\xff\xfe"])
def test_a_body_that_is_not_a_json_object_is_refused(client, payload):
    response = client.post("/o/register/", data=payload, content_type="application/json")
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_client_metadata"


@override_settings(TAPROOT_REGISTRATION_LIMIT=3)
def test_registration_is_throttled_per_address_with_a_clear_429(client):
    for _ in range(3):
        assert register(client, CLAUDE_REGISTRATION).status_code == 201
    response = register(client, CLAUDE_REGISTRATION)
    assert response.status_code == 429
    assert response.json()["error"] == "too_many_requests"
    assert "Too many client registrations" in response.json()["error_description"]
    assert 1 <= int(response["Retry-After"]) <= 3600
    assert Application.objects.count() == 3
    # Another address still has its own budget.
    assert register(client, CLAUDE_REGISTRATION, REMOTE_ADDR="203.0.113.9").status_code == 201


def test_registration_counts_live_in_the_database_cache_every_worker_shares(client):
    # A per-process cache would give each worker its own budget.
    assert register(client, CLAUDE_REGISTRATION).status_code == 201
    with connection.cursor() as cursor:
        cursor.execute("SELECT cache_key FROM taproot_cache")
        keys = [key for (key,) in cursor.fetchall()]
    assert any("taproot:throttle:register:127.0.0.1:" in key for key in keys), keys


@override_settings(TAPROOT_REGISTRATION_LIMIT=1)
def test_forwarded_addresses_are_ignored_unless_the_peer_is_a_trusted_proxy(client):
    spoofed = {"REMOTE_ADDR": "198.51.100.7", "HTTP_X_FORWARDED_FOR": "203.0.113.1"}
    assert register(client, CLAUDE_REGISTRATION, **spoofed).status_code == 201
    spoofed["HTTP_X_FORWARDED_FOR"] = "203.0.113.2"
    assert register(client, CLAUDE_REGISTRATION, **spoofed).status_code == 429


@override_settings(TAPROOT_REGISTRATION_LIMIT=1, TAPROOT_TRUSTED_PROXIES=["10.0.0.0/8"])
def test_behind_a_trusted_proxy_each_forwarded_client_is_counted_separately(client):
    via_proxy = {"REMOTE_ADDR": "10.1.2.3"}
    first = {**via_proxy, "HTTP_X_FORWARDED_FOR": "203.0.113.1"}
    second = {**via_proxy, "HTTP_X_FORWARDED_FOR": "203.0.113.2"}
    assert register(client, CLAUDE_REGISTRATION, **first).status_code == 201
    assert register(client, CLAUDE_REGISTRATION, **second).status_code == 201
    assert register(client, CLAUDE_REGISTRATION, **first).status_code == 429
    # A client cannot escape by prepending addresses: the proxy appends the real one.
    forged = {**via_proxy, "HTTP_X_FORWARDED_FOR": "192.0.2.99, 203.0.113.1"}
    assert register(client, CLAUDE_REGISTRATION, **forged).status_code == 429


def test_registration_management_update_must_keep_to_the_allowlist(client):
    body = register(client, CLAUDE_REGISTRATION).json()
    auth = {"HTTP_AUTHORIZATION": f"Bearer {body['registration_access_token']}"}
    url = f"/o/register/{body['client_id']}/"
    evil = {**CLAUDE_REGISTRATION, "redirect_uris": ["https://attacker.example/cb"]}
    response = client.put(url, data=evil, content_type="application/json", **auth)
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_redirect_uri"
    application = Application.objects.get(client_id=body["client_id"])
    assert application.redirect_uris == CLAUDE_CALLBACK
    unnamed = {**CLAUDE_REGISTRATION, "client_name": None}
    response = client.put(url, data=unnamed, content_type="application/json", **auth)
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_client_metadata"
    renamed = {**CLAUDE_REGISTRATION, "client_name": "Claude (work)"}
    response = client.put(url, data=renamed, content_type="application/json", **auth)
    assert response.status_code == 200
    assert response.json()["client_name"] == "Claude (work)"


@override_settings(ALLOWED_HOSTS=["internal", "testserver"])
def test_registration_management_replies_use_the_public_url(client):
    body = register(client, CLAUDE_REGISTRATION).json()
    public_uri = body["registration_client_uri"]
    headers = {
        "HTTP_AUTHORIZATION": f"Bearer {body['registration_access_token']}",
        "HTTP_HOST": "internal:8000",
    }
    url = f"/o/register/{body['client_id']}/"
    read = client.get(url, **headers)
    assert read.status_code == 200
    assert read.json()["registration_client_uri"] == public_uri
    updated = client.put(url, data=CLAUDE_REGISTRATION, content_type="application/json", **headers)
    assert updated.status_code == 200
    assert updated.json()["registration_client_uri"] == public_uri


def test_registration_management_needs_its_token(client):
    body = register(client, CLAUDE_REGISTRATION).json()
    url = f"/o/register/{body['client_id']}/"
    response = client.put(url, data=CLAUDE_REGISTRATION, content_type="application/json")
    assert response.status_code == 401
