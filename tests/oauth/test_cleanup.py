import hashlib
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone
from oauth2_provider.models import AccessToken, Application, Grant, RefreshToken

from tests.oauth.conftest import CLAUDE_REGISTRATION, Flow, register

pytestmark = pytest.mark.django_db


def age(client_id: str, days: int) -> None:
    Application.objects.filter(client_id=client_id).update(
        created=timezone.now() - timedelta(days=days)
    )


def registered(client) -> str:
    return register(client, CLAUDE_REGISTRATION).json()["client_id"]


def cleanup(*args: str) -> str:
    out = StringIO()
    call_command("cleanup_oauth_clients", *args, stdout=out)
    return out.getvalue()


def checksum(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


def exists(client_id: str) -> bool:
    return Application.objects.filter(client_id=client_id).exists()


def test_old_registrations_that_were_never_used_are_deleted(client):
    stale = registered(client)
    age(stale, 31)
    assert "Deleted 1 stale registered client" in cleanup()
    assert not exists(stale)
    # Its registration-management token went with it.
    assert not AccessToken.objects.exists()


def test_recent_registrations_are_kept(client):
    recent = registered(client)
    age(recent, 29)
    cleanup()
    assert exists(recent)


def test_clients_holding_a_live_token_are_kept(claude_flow):
    claude_flow.tokens()
    client_id = claude_flow.registered.client_id
    age(client_id, 400)
    cleanup()
    assert exists(client_id)


def test_a_usable_refresh_token_keeps_a_client_whose_access_token_expired(claude_flow):
    claude_flow.tokens()
    client_id = claude_flow.registered.client_id
    age(client_id, 60)
    AccessToken.objects.filter(user__isnull=False).update(
        expires=timezone.now() - timedelta(days=1)
    )
    cleanup()
    assert exists(client_id)


def test_refresh_tokens_unused_past_their_lifetime_no_longer_keep_a_client(claude_flow):
    claude_flow.tokens()
    client_id = claude_flow.registered.client_id
    age(client_id, 200)
    AccessToken.objects.filter(user__isnull=False).update(
        expires=timezone.now() - timedelta(days=91)
    )
    cleanup()
    assert not exists(client_id)
    assert not RefreshToken.objects.exists()


def test_revoked_token_families_do_not_keep_a_client(claude_flow):
    tokens = claude_flow.tokens()
    client_id = claude_flow.registered.client_id
    data = {
        "client_id": client_id,
        "client_secret": claude_flow.registered.client_secret,
        "token": tokens["refresh_token"],
        "token_type_hint": "refresh_token",
    }
    assert claude_flow.client.post("/o/revoke_token/", data).status_code == 200
    age(client_id, 31)
    cleanup()
    assert not exists(client_id)


def test_a_pending_authorization_code_keeps_a_client(claude_flow):
    claude_flow.code()
    client_id = claude_flow.registered.client_id
    age(client_id, 31)
    cleanup()
    assert exists(client_id)
    Grant.objects.update(expires=timezone.now() - timedelta(minutes=1))
    cleanup()
    assert not exists(client_id)


def test_manually_created_clients_are_never_deleted(user):
    manual = Application.objects.create(
        name="operator's client",
        client_type="confidential",
        authorization_grant_type="authorization-code",
        redirect_uris="https://claude.ai/api/mcp/auth_callback",
    )
    Application.objects.filter(pk=manual.pk).update(created=timezone.now() - timedelta(days=900))
    cleanup()
    assert Application.objects.filter(pk=manual.pk).exists()


def test_days_and_dry_run_options(client):
    client_id = registered(client)
    age(client_id, 8)
    assert "0 stale registered clients" in cleanup("--days", "10")
    assert "1 stale registered client would be deleted" in cleanup("--days", "7", "--dry-run")
    assert exists(client_id)
    cleanup("--days", "7")
    assert not exists(client_id)


def test_days_must_be_positive():
    with pytest.raises(CommandError):
        cleanup("--days", "0")


def test_a_deleted_client_is_told_to_register_again(claude_flow):
    # Claude registers anew when the token endpoint answers invalid_client.
    code = claude_flow.code()
    Application.objects.filter(client_id=claude_flow.registered.client_id).delete()
    response = claude_flow.exchange(code)
    assert response.status_code == 401
    assert response.json()["error"] == "invalid_client"


def test_cleartokens_removes_what_a_dead_connection_left_behind(claude_flow):
    # docs/connecting-claude.md schedules django-oauth-toolkit's cleartokens next to the cleanup.
    live = claude_flow.tokens()
    dead = Flow(claude_flow.client, claude_flow.registered).tokens()
    AccessToken.objects.filter(token_checksum=checksum(dead["access_token"])).update(
        expires=timezone.now() - timedelta(days=91)
    )
    call_command("cleartokens", stdout=StringIO(), stderr=StringIO())
    assert not AccessToken.objects.filter(token_checksum=checksum(dead["access_token"])).exists()
    assert not RefreshToken.objects.filter(token_checksum=checksum(dead["refresh_token"])).exists()
    assert AccessToken.objects.filter(token_checksum=checksum(live["access_token"])).exists()
    assert RefreshToken.objects.filter(token_checksum=checksum(live["refresh_token"])).exists()
