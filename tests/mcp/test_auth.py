"""Who may call /mcp: only a live token of an active user, issued for exactly this /mcp URL."""

from datetime import timedelta
from io import StringIO
from typing import Any

import httpx2
import pytest
from django.core.management import call_command
from django.utils import timezone
from oauth2_provider.models import get_access_token_model, set_token_value

from bench.token_lookup import orm_stored_token
from mcp_bridge.auth import find_access_token, is_for_this_server, stored_token
from memories.models import Closing, ReflectCall
from oauth.tokens import token_checksum
from tests.mcp.tokens import (
    make_access_token,
    make_application,
    make_registration_token,
    revoke_access_token,
)

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "auth-test", "version": "1"},
    },
}


def post_initialize(mcp_url: str, authorization: str | None) -> httpx2.Response:
    headers = {"Accept": "application/json, text/event-stream"}
    if authorization is not None:
        headers["Authorization"] = authorization
    return httpx2.post(mcp_url, json=INITIALIZE, headers=headers, timeout=10)


def assert_challenged(response: httpx2.Response, server: Any) -> None:
    assert response.status_code == 401, response.text
    challenge = response.headers["www-authenticate"]
    assert challenge.startswith("Bearer ")
    expected = f'resource_metadata="{server.url}/.well-known/oauth-protected-resource/mcp"'
    assert expected in challenge
    assert response.json()["error"] == "invalid_token"


@pytest.mark.django_db(transaction=True)
@pytest.mark.server
def test_a_valid_token_opens_the_endpoint(server, mcp_url, user, token_for):
    response = post_initialize(mcp_url, f"Bearer {token_for(user)}")
    assert response.status_code == 200
    assert response.json()["result"]["serverInfo"]["name"] == "taproot"


@pytest.mark.django_db(transaction=True)
@pytest.mark.server
def test_the_issued_token_works_against_the_server(user, settings, mcp_url, connect):
    """A token from `manage.py issue_token` (tested in tests/oauth) opens /mcp."""
    settings.TAPROOT_MCP_URL = mcp_url
    out = StringIO()
    call_command("issue_token", user="alice", stdout=out, stderr=StringIO())
    raw = out.getvalue().strip()
    assert connect(raw).reply("taproot_status")["live_memories"] == 0


@pytest.mark.django_db(transaction=True)
@pytest.mark.server
def test_a_token_whose_resource_has_a_trailing_slash_is_accepted(server, mcp_url, user):
    token = make_access_token(user, resource=f"{mcp_url}/")
    assert post_initialize(mcp_url, f"Bearer {token}").status_code == 200


@pytest.mark.django_db(transaction=True)
@pytest.mark.server
def test_a_request_without_a_token_gets_the_resource_metadata_challenge(server, mcp_url):
    assert_challenged(post_initialize(mcp_url, None), server)


@pytest.mark.django_db(transaction=True)
@pytest.mark.server
def test_the_challenge_names_the_public_url_whatever_host_was_used(server, mcp_url):
    # Behind a proxy the Host header says little; the metadata URL comes from
    # TAPROOT_PUBLIC_URL (the test server's own URL).
    port = mcp_url.rsplit(":", 1)[1].split("/", 1)[0]
    response = httpx2.post(
        mcp_url, json=INITIALIZE, headers={"Host": f"localhost:{port}"}, timeout=10
    )
    assert_challenged(response, server)


MALFORMED = [
    "Bearer",
    "Bearer not-a-token-anyone-issued",
    "Bearer two words",
    "Basic YWxpY2U6cHc=",
    "Bearer " + "x" * 5000,
]


@pytest.mark.django_db(transaction=True)
@pytest.mark.server
def test_malformed_or_unknown_credentials_are_refused(server, mcp_url):
    for authorization in MALFORMED:
        assert_challenged(post_initialize(mcp_url, authorization), server)


def expired(user: Any, mcp_url: str) -> str:
    return make_access_token(user, resource=mcp_url, expires_in=timedelta(seconds=-1))


def revoked(user: Any, mcp_url: str) -> str:
    token = make_access_token(user, resource=mcp_url)
    revoke_access_token(token)
    return token


def other_resource(user: Any, mcp_url: str) -> str:
    return make_access_token(user, resource="https://elsewhere.example/mcp")


def origin_only(user: Any, mcp_url: str) -> str:
    # django-oauth-toolkit's own check is a prefix match and would accept this one.
    return make_access_token(user, resource=mcp_url.removesuffix("/mcp"))


def longer_path(user: Any, mcp_url: str) -> str:
    return make_access_token(user, resource=f"{mcp_url}/admin")


def no_resource(user: Any, mcp_url: str) -> str:
    return make_access_token(user, resource=None)


def registration(user: Any, mcp_url: str) -> str:
    return make_registration_token()


def inactive_user(user: Any, mcp_url: str) -> str:
    user.is_active = False
    user.save()
    return make_access_token(user, resource=mcp_url)


REFUSED_TOKENS = [
    expired,
    revoked,
    other_resource,
    origin_only,
    longer_path,
    no_resource,
    registration,
    inactive_user,
]


@pytest.mark.django_db(transaction=True)
@pytest.mark.server
def test_tokens_not_valid_for_this_endpoint_are_refused(server, mcp_url, user):
    for make_token in REFUSED_TOKENS:
        token = make_token(user, mcp_url)
        response = post_initialize(mcp_url, f"Bearer {token}")
        assert response.status_code == 401, make_token.__name__
        assert_challenged(response, server)


@pytest.mark.django_db(transaction=True)
@pytest.mark.server
def test_a_token_without_the_mcp_scope_is_forbidden(server, mcp_url, user):
    token = make_access_token(user, resource=mcp_url, scope="read")
    response = post_initialize(mcp_url, f"Bearer {token}")
    assert response.status_code == 403
    assert 'error="insufficient_scope"' in response.headers["www-authenticate"]


@pytest.mark.django_db(transaction=True)
@pytest.mark.server
def test_a_token_stops_working_once_revoked(server, mcp_url, user, token_for):
    token = token_for(user)
    assert post_initialize(mcp_url, f"Bearer {token}").status_code == 200
    revoke_access_token(token)
    assert_challenged(post_initialize(mcp_url, f"Bearer {token}"), server)


@pytest.mark.django_db(transaction=True)
@pytest.mark.server
def test_a_revoked_token_is_refused_on_the_very_next_request(server, mcp_url, user, token_for):
    """No request trusts an earlier one's token check: the connections the server keeps
    between requests see the revocation at once."""
    token = token_for(user)
    headers = {"Accept": "application/json, text/event-stream", "Authorization": f"Bearer {token}"}
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call"}
    status = {**call, "params": {"name": "taproot_status", "arguments": {}}}
    for _ in range(5):  # every database thread that serves the next one has seen the token
        response = httpx2.post(mcp_url, json=status, headers=headers, timeout=10)
        assert response.status_code == 200
        assert '"isError":true' not in response.text
    revoke_access_token(token)
    refused = httpx2.post(mcp_url, json=status, headers=headers, timeout=10)
    assert_challenged(refused, server)


@pytest.mark.django_db
def test_the_verifier_names_the_user_and_this_resource(user, settings, django_assert_num_queries):
    token = make_access_token(user, resource=settings.TAPROOT_MCP_URL)
    with django_assert_num_queries(1):  # the token, its client and its user at once
        access = find_access_token(token)
    assert access is not None
    # The tools act for this user with no second lookup.
    assert access.user == user
    assert access.user.username == user.username and access.user.is_active
    assert access.subject == str(user.pk)
    assert access.resource == settings.TAPROOT_MCP_URL
    assert access.scopes == ["mcp"]
    assert access.claims == {
        "iss": settings.TAPROOT_PUBLIC_URL,
        "taproot_client_name": "Test client",  # for the record of a reflect call
    }


def _every_column(user: Any) -> dict[str, Any]:
    return {field.attname: getattr(user, field.attname) for field in user._meta.concrete_fields}


@pytest.mark.django_db
def test_the_written_out_token_lookup_reads_what_django_oauth_toolkits_query_reads(
    user, other_user, settings
):
    """stored_token is one statement written out; its ORM equivalent is the query
    django-oauth-toolkit makes (bench.token_lookup.orm_stored_token). Every value must
    come back the same, converted as the ORM converts it (dates aware, the resource list
    decoded), for every kind of token the table holds."""
    other_user.first_name, other_user.is_active = "Zoë", False
    other_user.last_login = timezone.now() - timedelta(days=2)
    other_user.save()
    raw_tokens = {
        "live": make_access_token(user, resource=[settings.TAPROOT_MCP_URL, "https://x.example"]),
        "expired": make_access_token(
            other_user,
            resource=None,
            expires_in=-timedelta(hours=1),
            application=make_application(name="Ünïcode client ☃"),
        ),
        "registration": make_registration_token(),
        "unknown": "never-issued",
    }
    orphan = get_access_token_model()(
        user=user, application=None, expires=timezone.now(), scope="mcp read"
    )
    set_token_value(orphan, "no-client")
    orphan.save()
    raw_tokens["without a client"] = "no-client"
    # The user's last reflect and close come with the token (the other user has neither).
    loaded_at = timezone.now() - timedelta(hours=3)
    for hours in (3, 5):
        ReflectCall.objects.create(owner=user, called_at=timezone.now() - timedelta(hours=hours))
    Closing.objects.create(owner=user, reflection="Bye.", created_at=loaded_at + timedelta(hours=1))

    for kind, raw in raw_tokens.items():
        checksum = token_checksum(raw)
        written_out, through_the_orm = stored_token(checksum), orm_stored_token(checksum)
        assert written_out == through_the_orm, kind
        if written_out is not None:
            assert through_the_orm is not None
            assert _every_column(written_out.user) == _every_column(through_the_orm.user), kind
            assert written_out.user._state.db == through_the_orm.user._state.db
            assert not written_out.user._state.adding
    live = stored_token(token_checksum(raw_tokens["live"]))
    assert live is not None and live.resource == [settings.TAPROOT_MCP_URL, "https://x.example"]
    assert live.expires.tzinfo is not None
    assert live.loads.last_reflect == ReflectCall.objects.latest("called_at").called_at
    assert live.loads.last_close == Closing.objects.get().created_at
    assert stored_token(token_checksum(raw_tokens["without a client"])).client_id == ""


def test_the_resource_must_match_exactly_after_trailing_slashes(settings):
    settings.TAPROOT_MCP_URL = "https://taproot.example/mcp"
    assert is_for_this_server(["https://taproot.example/mcp"])
    assert is_for_this_server(["https://other.example/api", "https://taproot.example/mcp/"])
    assert not is_for_this_server(["https://taproot.example"])
    assert not is_for_this_server(["https://taproot.example/mcp/extra"])
    assert not is_for_this_server(["https://taproot.example/mc"])
    assert not is_for_this_server([])
    assert not is_for_this_server("https://taproot.example/mcp")
