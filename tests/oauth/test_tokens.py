import base64
import hashlib
from datetime import timedelta
from urllib.parse import quote

import pytest
from django.conf import settings
from django.utils import timezone
from oauth2_provider.models import AccessToken, Grant, RefreshToken

from tests.oauth.conftest import Flow, Registered

pytestmark = pytest.mark.django_db


def checksum(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def user_tokens():
    return AccessToken.objects.filter(user__isnull=False)


def assert_error(response, status: int, error: str) -> None:
    assert response.status_code == status, response.content
    assert response.json()["error"] == error


def test_code_exchange_issues_a_30_day_token_bound_to_user_and_mcp(claude_flow, user):
    tokens = claude_flow.tokens()
    assert tokens["token_type"] == "Bearer"
    assert tokens["scope"] == "mcp"
    # Claude.ai often never refreshes: the token outlives a missed refresh.
    assert 30 * 86400 - 100 <= tokens["expires_in"] <= 30 * 86400
    assert tokens["refresh_token"]
    access = AccessToken.objects.get(token_checksum=checksum(tokens["access_token"]))
    assert access.user == user
    assert access.resource == [settings.TAPROOT_MCP_URL]
    assert access.application.client_id == claude_flow.registered.client_id
    refresh = RefreshToken.objects.get(token_checksum=checksum(tokens["refresh_token"]))
    assert refresh.resource == [settings.TAPROOT_MCP_URL]
    assert refresh.user == user


def test_tokens_are_stored_hashed(claude_flow):
    tokens = claude_flow.tokens()
    access = AccessToken.objects.get(token_checksum=checksum(tokens["access_token"]))
    refresh = RefreshToken.objects.get(token_checksum=checksum(tokens["refresh_token"]))
    assert access.token in ("", None)
    assert refresh.token in ("", None)
    assert tokens["access_token"] not in str(AccessToken.objects.values_list())


def test_client_secret_basic_works_for_a_client_that_registered_for_post(claude_flow):
    code = claude_flow.code()
    registered = claude_flow.registered
    basic = base64.b64encode(
        f"{quote(registered.client_id)}:{quote(registered.client_secret)}".encode()
    ).decode()
    response = claude_flow.client.post(
        "/o/token/",
        {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": registered.redirect_uri,
            "code_verifier": claude_flow.verifier,
        },
        HTTP_AUTHORIZATION=f"Basic {basic}",
    )
    assert response.status_code == 200, response.content


def test_public_client_exchanges_a_code_without_a_secret(public_flow):
    tokens = public_flow.tokens()
    assert tokens["refresh_token"]


def test_token_request_without_resource_gets_the_grants_resource(claude_flow):
    response = claude_flow.exchange(claude_flow.code(), resource=None)
    assert response.status_code == 200
    access = AccessToken.objects.get(token_checksum=checksum(response.json()["access_token"]))
    assert access.resource == [settings.TAPROOT_MCP_URL]


@pytest.mark.parametrize(
    "resource", ["http://127.0.0.1:8000", "http://127.0.0.1:8000/", "https://other.example/mcp"]
)
def test_token_request_for_a_foreign_resource_is_refused(claude_flow, resource):
    response = claude_flow.exchange(claude_flow.code(), resource=resource)
    assert_error(response, 400, "invalid_target")
    assert not user_tokens().exists()


def test_a_refused_resource_is_quoted_only_by_its_start(claude_flow):
    resource = "https://other.example/" + "x" * 200_000
    response = claude_flow.exchange(claude_flow.code(), resource=resource)
    assert_error(response, 400, "invalid_target")
    description = response.json()["error_description"]
    assert "(200,022 characters)" in description
    assert len(description) < 300


def test_wrong_verifier_is_refused(claude_flow):
    response = claude_flow.exchange(claude_flow.code(), code_verifier="x" * 50)
    assert_error(response, 400, "invalid_grant")
    assert not user_tokens().exists()


def test_missing_verifier_is_refused(claude_flow):
    response = claude_flow.exchange(claude_flow.code(), code_verifier=None)
    assert_error(response, 400, "invalid_request")
    assert not user_tokens().exists()


def test_a_code_works_only_once_and_its_replay_revokes_what_it_gave(claude_flow):
    code = claude_flow.code()
    first = claude_flow.exchange(code)
    assert first.status_code == 200
    assert_error(claude_flow.exchange(code), 400, "invalid_grant")
    # RFC 6749 §4.1.2: the tokens the code gave are revoked too.
    assert not user_tokens().exists()
    assert not RefreshToken.objects.filter(revoked__isnull=True).exists()
    assert_error(claude_flow.refresh(first.json()["refresh_token"]), 400, "invalid_grant")


def test_a_code_presented_by_another_client_is_refused(claude_flow, public_client):
    code = claude_flow.code()
    thief = Flow(claude_flow.client, public_client)
    thief.verifier = claude_flow.verifier
    response = thief.exchange(code, redirect_uri=claude_flow.registered.redirect_uri)
    assert_error(response, 400, "invalid_grant")
    assert not user_tokens().exists()
    # The rightful client can still use it.
    assert claude_flow.exchange(code).status_code == 200


def test_a_wrong_client_secret_is_refused_as_invalid_client(claude_flow):
    code = claude_flow.code()
    claude_flow.registered = Registered(
        claude_flow.registered.client_id, "not-the-secret", claude_flow.registered.redirect_uri, {}
    )
    assert_error(claude_flow.exchange(code), 401, "invalid_client")
    assert not user_tokens().exists()


def test_an_expired_code_is_refused(claude_flow):
    code = claude_flow.code()
    Grant.objects.update(expires=timezone.now() - timedelta(seconds=1))
    assert_error(claude_flow.exchange(code), 400, "invalid_grant")


def test_refresh_rotates_the_refresh_token_and_keeps_the_binding(claude_flow, user):
    first = claude_flow.tokens()
    response = claude_flow.refresh(first["refresh_token"])
    assert response.status_code == 200, response.content
    second = response.json()
    assert second["refresh_token"] != first["refresh_token"]
    assert second["access_token"] != first["access_token"]
    access = AccessToken.objects.get(token_checksum=checksum(second["access_token"]))
    assert access.user == user
    assert access.resource == [settings.TAPROOT_MCP_URL]
    # The old access token is gone, the old refresh token revoked.
    assert not AccessToken.objects.filter(token_checksum=checksum(first["access_token"])).exists()
    old = RefreshToken.objects.get(token_checksum=checksum(first["refresh_token"]))
    assert old.revoked is not None


def test_replaying_a_rotated_refresh_token_revokes_the_whole_family(claude_flow):
    first = claude_flow.tokens()
    second = claude_flow.refresh(first["refresh_token"]).json()
    assert_error(claude_flow.refresh(first["refresh_token"]), 400, "invalid_grant")
    # No grace period: the family is dead, including the newest pair.
    assert not user_tokens().exists()
    assert not RefreshToken.objects.filter(revoked__isnull=True).exists()
    assert_error(claude_flow.refresh(second["refresh_token"]), 400, "invalid_grant")


def test_refresh_for_a_foreign_resource_is_refused(claude_flow):
    first = claude_flow.tokens()
    response = claude_flow.refresh(first["refresh_token"], resource="https://other.example/mcp")
    assert_error(response, 400, "invalid_target")
    assert AccessToken.objects.filter(token_checksum=checksum(first["access_token"])).exists()


def test_refresh_by_another_client_is_refused(claude_flow, public_client):
    first = claude_flow.tokens()
    thief = Flow(claude_flow.client, public_client)
    assert_error(thief.refresh(first["refresh_token"]), 400, "invalid_grant")


def test_revoking_the_access_token_also_revokes_its_refresh_token(claude_flow):
    tokens = claude_flow.tokens()
    data = {
        "client_id": claude_flow.registered.client_id,
        "client_secret": claude_flow.registered.client_secret,
        "token": tokens["access_token"],
    }
    assert claude_flow.client.post("/o/revoke_token/", data).status_code == 200
    assert not user_tokens().exists()
    assert_error(claude_flow.refresh(tokens["refresh_token"]), 400, "invalid_grant")


def test_a_client_cannot_revoke_another_clients_token(claude_flow, public_client):
    tokens = claude_flow.tokens()
    data = {"client_id": public_client.client_id, "token": tokens["access_token"]}
    assert claude_flow.client.post("/o/revoke_token/", data).status_code == 200
    assert user_tokens().count() == 1


def test_the_password_and_client_credentials_grants_are_refused(claude_flow):
    response = claude_flow.token_request(
        {"grant_type": "password", "username": "alice", "password": "pw-alice-123"}
    )
    assert response.status_code in (400, 401)
    assert response.json()["error"] in {"unauthorized_client", "unsupported_grant_type"}
    response = claude_flow.token_request({"grant_type": "client_credentials"})
    assert response.json()["error"] in {"unauthorized_client", "unsupported_grant_type"}
    assert not AccessToken.objects.filter(scope="mcp").exists()


def test_replaying_a_code_also_revokes_the_tokens_refreshed_from_it(claude_flow):
    code = claude_flow.code()
    first = claude_flow.exchange(code).json()
    second = claude_flow.refresh(first["refresh_token"]).json()
    assert AccessToken.objects.filter(token_checksum=checksum(second["access_token"])).exists()
    assert_error(claude_flow.exchange(code), 400, "invalid_grant")
    assert not user_tokens().exists()
    assert_error(claude_flow.refresh(second["refresh_token"]), 400, "invalid_grant")


def test_a_code_presented_again_before_its_grant_is_deleted_revokes_what_it_gave(claude_flow):
    # oauthlib deletes the grant only after the tokens are saved: a second presentation
    # can arrive in between and still find the grant.
    code = claude_flow.code()
    grant = Grant.objects.get(code=code)
    first = claude_flow.exchange(code)
    assert first.status_code == 200
    grant.save(force_insert=True)  # the first exchange has not deleted it yet
    assert_error(claude_flow.exchange(code), 400, "invalid_grant")
    assert not user_tokens().exists()
    assert_error(claude_flow.refresh(first.json()["refresh_token"]), 400, "invalid_grant")


def test_a_code_replayed_by_another_client_leaves_the_rightful_tokens_alone(
    claude_flow, public_client
):
    # The code is bound to its client: another client presenting it learns nothing and
    # proves nothing about the code's own exchange, so it must not end that connection.
    code = claude_flow.code()
    tokens = claude_flow.exchange(code).json()
    thief = Flow(claude_flow.client, public_client)
    thief.verifier = claude_flow.verifier
    response = thief.exchange(code, redirect_uri=claude_flow.registered.redirect_uri)
    assert_error(response, 400, "invalid_grant")
    assert AccessToken.objects.filter(token_checksum=checksum(tokens["access_token"])).exists()
    assert claude_flow.refresh(tokens["refresh_token"]).status_code == 200
