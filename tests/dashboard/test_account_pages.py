"""Closings, the export download and connected clients."""

import json
import secrets
from datetime import timedelta

import pytest
from django.utils import timezone
from oauth2_provider.models import (
    get_access_token_model,
    get_application_model,
    get_grant_model,
    get_refresh_token_model,
)

from memories.models import Closing, Memory
from memories.services import close, import_store
from tests.dashboard.conftest import XSS, downloaded, htmx
from tests.store import unchanged

pytestmark = pytest.mark.django_db

AccessToken = get_access_token_model()
Application = get_application_model()
Grant = get_grant_model()
RefreshToken = get_refresh_token_model()


# Closings


def test_closings_newest_first_with_title_and_date(logged_in, user):
    now = timezone.now()
    close(owner=user, reflection="First talk.", conversation_title="One", now=now - timedelta(2))
    close(owner=user, reflection="Second talk.", conversation_title="Two", now=now)

    html = logged_in.get("/dashboard/closings/").text

    assert html.index("Second talk.") < html.index("First talk.")
    assert "One" in html and "Two" in html
    assert f"{now:%Y-%m-%d}" in html


def test_only_http_conversation_urls_become_links(logged_in, user):
    close(owner=user, reflection="a", conversation_url="https://claude.ai/chat/1")
    close(owner=user, reflection="b", conversation_url="javascript:alert(1)")
    close(owner=user, reflection="c", conversation_url="data:text/html,<b>x</b>")

    html = logged_in.get("/dashboard/closings/").text

    assert '<a href="https://claude.ai/chat/1" rel="noopener noreferrer">' in html
    assert 'href="javascript' not in html
    assert 'href="data:' not in html
    assert "javascript:alert(1)" in html


def test_closings_are_the_users_own(logged_in, other_user):
    close(owner=other_user, reflection="Bob's closing")

    assert "Bob&#x27;s closing" not in logged_in.get("/dashboard/closings/").text


def test_closings_are_paginated(logged_in, user):
    for index in range(23):
        close(owner=user, reflection=f"closing {index}")

    first = logged_in.get("/dashboard/closings/")
    second = logged_in.get("/dashboard/closings/", {"page": "2"})

    assert len(first.context["page"].object_list) == 20
    assert len(second.context["page"].object_list) == 3


# Export


def test_export_downloads_the_users_store_as_taproot_json(logged_in, user, make_memory):
    live = make_memory(gist="Live")
    archived = make_memory(gist="Archived", archived_at=timezone.now(), archive_reason="old")
    close(owner=user, reflection="Bye")

    response = logged_in.get("/dashboard/export/")

    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/json")
    assert response["Content-Disposition"].startswith('attachment; filename="taproot-export-')
    data = json.loads(downloaded(response))
    assert data["format"] == "taproot/1"
    keys = {entry["key"] for entry in data["entries"]}
    assert {f"mem:{live.pk}", f"mem:{archived.pk}"} <= keys
    assert data["total_keys"] == 3


def test_export_holds_nothing_of_another_user(logged_in, foreign_memory):
    data = json.loads(downloaded(logged_in.get("/dashboard/export/")))

    assert data["entries"] == []


def test_exported_file_imports_back(logged_in, user, other_user, make_memory):
    memory = make_memory(gist="Round trip", content="Travels and returns.", tags=["t"])
    close(owner=user, reflection="Closing travels too")
    exported = json.loads(downloaded(logged_in.get("/dashboard/export/")))

    import_store(owner=other_user, data=exported)

    copy = Memory.objects.get(owner=other_user)
    assert (copy.gist, copy.content, copy.tags) == ("Round trip", "Travels and returns.", ["t"])
    assert copy.pk != memory.pk  # the id belongs to another user, so it is remapped
    assert Closing.objects.filter(owner=other_user).count() == 1


# Connected clients


def make_client_with_tokens(user, name="Claude"):
    application = Application.objects.create(
        name=name,
        client_type=Application.CLIENT_CONFIDENTIAL,
        authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
        redirect_uris="https://claude.ai/api/mcp/auth_callback",
        client_secret="secret",
    )
    access = AccessToken.objects.create(
        user=user,
        application=application,
        token=secrets.token_urlsafe(),
        expires=timezone.now() + timedelta(hours=1),
        scope="mcp",
    )
    RefreshToken.objects.create(
        user=user, application=application, token=secrets.token_urlsafe(), access_token=access
    )
    Grant.objects.create(
        user=user,
        application=application,
        code=secrets.token_urlsafe(),
        expires=timezone.now() + timedelta(minutes=1),
        redirect_uri="https://claude.ai/api/mcp/auth_callback",
    )
    return application


def test_clients_page_lists_applications_holding_tokens_for_the_user(logged_in, user, other_user):
    mine = make_client_with_tokens(user, name="Claude")
    make_client_with_tokens(other_user, name="Bob's tool")
    Application.objects.create(
        name="Idle registration",
        client_type=Application.CLIENT_CONFIDENTIAL,
        authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
        redirect_uris="https://claude.ai/api/mcp/auth_callback",
    )

    html = logged_in.get("/dashboard/clients/").text

    assert "Claude" in html
    assert mine.client_id in html
    assert "claude.ai" in html
    assert "1 access, 1 refresh" in html
    assert "Bob&#x27;s tool" not in html
    assert "Idle registration" not in html


def test_clients_page_says_when_the_clients_access_expires(logged_in, user):
    application = make_client_with_tokens(user)
    expires = AccessToken.objects.get(application=application).expires
    html = logged_in.get("/dashboard/clients/").text
    assert f"{expires:%Y-%m-%d %H:%M} UTC" in html
    AccessToken.objects.filter(application=application).update(
        expires=timezone.now() - timedelta(minutes=1)
    )
    html = logged_in.get("/dashboard/clients/").text
    assert "no live access token: it must refresh, or you reconnect it" in html


def test_revoke_ends_the_users_tokens_and_grants_only(logged_in, user, other_user):
    application = make_client_with_tokens(user)
    AccessToken.objects.create(
        user=other_user,
        application=application,
        token=secrets.token_urlsafe(),
        expires=timezone.now() + timedelta(hours=1),
        scope="mcp",
    )

    response = logged_in.post(f"/dashboard/clients/{application.pk}/revoke/", **htmx())

    assert response.status_code == 200
    assert "Access revoked." in response.text
    assert not AccessToken.objects.filter(user=user).exists()
    assert not RefreshToken.objects.filter(user=user, revoked__isnull=True).exists()
    assert not Grant.objects.filter(user=user).exists()
    assert AccessToken.objects.filter(user=other_user).count() == 1
    assert Application.objects.filter(pk=application.pk).exists()


def test_revoke_without_htmx_redirects_back(logged_in, user):
    application = make_client_with_tokens(user)

    response = logged_in.post(f"/dashboard/clients/{application.pk}/revoke/")

    assert response.status_code == 302
    assert response["Location"] == "/dashboard/clients/"


def test_revoking_a_client_that_holds_nothing_for_the_user_is_a_404(logged_in, other_user):
    application = make_client_with_tokens(other_user)

    response = logged_in.post(f"/dashboard/clients/{application.pk}/revoke/")

    assert response.status_code == 404
    assert AccessToken.objects.filter(user=other_user).count() == 1


def test_stored_memory_text_in_a_closing_is_escaped(logged_in, user):
    close(owner=user, reflection=XSS, conversation_title=XSS)

    html = logged_in.get("/dashboard/closings/").text

    assert "<script>alert(1)" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_revoke_asks_first_in_the_card_and_on_its_own_page(logged_in, user):
    application = make_client_with_tokens(user, name="Claude")
    url = f"/dashboard/clients/{application.pk}/revoke/"

    listing = logged_in.get("/dashboard/clients/").text
    assert f'<a id="revoke-{application.pk}"' in listing and 'hx-get="' + url in listing
    assert 'action="' + url not in listing  # nothing on the list acts at once

    with unchanged():
        card = logged_in.get(url, **htmx())
        page = logged_in.get(url)

    assert card.status_code == page.status_code == 200
    assert card.text.lstrip().startswith(
        f'<article class="card client is-confirming" id="client-{application.pk}"'
    )
    for html in (card.text, page.text):
        assert "Revoke access for Claude?" in html
        assert f'<form class="confirm-delete" method="post" action="{url}"' in html
        assert "Keep access" in html
    assert AccessToken.objects.filter(user=user).exists()


def test_asking_to_revoke_a_client_that_holds_nothing_for_the_user_is_a_404(logged_in, other_user):
    application = make_client_with_tokens(other_user)
    url = f"/dashboard/clients/{application.pk}/revoke/"
    assert logged_in.get(url, **htmx()).status_code == 404
    assert logged_in.get(url).status_code == 404
