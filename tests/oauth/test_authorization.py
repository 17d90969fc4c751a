from urllib.parse import quote

import pytest
from django.conf import settings
from django.test import override_settings
from oauth2_provider.models import AccessToken, Grant

from tests.oauth.browser import query_of, read_form
from tests.oauth.conftest import STATE, Flow

pytestmark = pytest.mark.django_db

ISSUER = "http://127.0.0.1:8000"


def assert_refused(response, flow: Flow, error: str) -> dict[str, str]:
    """A redirect back to the client carrying `error`, `state` and `iss`, and no grant."""
    assert response.status_code == 302, response.content
    location = response["Location"]
    assert location.startswith(flow.registered.redirect_uri + "?")
    params = query_of(location)
    assert params["error"] == error, params
    assert params["state"] == STATE
    assert params["iss"] == ISSUER
    assert "code" not in params
    assert not Grant.objects.exists()
    assert not AccessToken.objects.filter(user__isnull=False).exists()
    return params


def test_authorization_requires_logging_in_first(client, claude_client):
    flow = Flow(client, claude_client)
    response = flow.consent_page()
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/?next=" + quote("/o/authorize/"))


def test_login_page_returns_to_the_authorization_request(client, user, claude_client):
    flow = Flow(client, claude_client)
    login_url = flow.consent_page()["Location"]
    page = client.get(login_url)
    assert b"An app wants to connect" in page.content
    _, fields = read_form(page.content.decode())
    fields.update(username="alice", password="pw-alice-123")
    response = client.post("/accounts/login/", fields)
    assert response.status_code == 302
    assert response["Location"].startswith("/o/authorize/?")
    assert client.get(response["Location"]).status_code == 200


def test_consent_page_shows_client_name_redirect_host_and_resource(claude_flow):
    page = claude_flow.consent_page()
    assert page.status_code == 200
    html = page.content.decode()
    assert "Claude" in html
    assert "<code>claude.<wbr>ai</code>" in html
    assert "<code>http://<wbr>127.<wbr>0.<wbr>0.<wbr>1:8000/<wbr>mcp</code>" in html
    assert "Read and write your Taproot memories" in html
    assert 'name="allow"' in html and ">Deny<" in html
    assert "alice" in html


def test_consent_page_lets_the_resource_wrap_only_after_slashes_and_dots(claude_flow, settings):
    settings.TAPROOT_MCP_URL = "https://memories.taproot-garden.example.com/mcp"

    html = claude_flow.consent_page(resource=None).content.decode()

    resource = html.split("<dt>Wants access to</dt>", 1)[1].split("</dd>", 1)[0]
    assert resource == (
        "\n        <dd><code>https://<wbr>memories.<wbr>taproot-garden.<wbr>example.<wbr>com/<wbr>mcp"
        "</code>"
    )
    host = html.split("<dt>Sends you back to</dt>", 1)[1].split("</dd>", 1)[0]
    assert host.endswith("<dd><code>claude.<wbr>ai</code>")


def test_consent_page_escapes_a_hostile_client_name(logged_in, client):
    from tests.oauth.conftest import CLAUDE_REGISTRATION, Registered, register

    body = register(client, {**CLAUDE_REGISTRATION, "client_name": "<script>x()</script>"}).json()
    flow = Flow(
        logged_in,
        Registered(body["client_id"], body["client_secret"], body["redirect_uris"][0], body),
    )
    html = flow.consent_page().content.decode()
    assert "<script>x()" not in html
    assert "&lt;script&gt;x()" in html


def test_allow_redirects_with_a_code_state_and_issuer(claude_flow, user):
    response = claude_flow.decide(allow=True)
    assert response.status_code == 302
    params = query_of(response["Location"])
    assert set(params) == {"code", "state", "iss"}
    assert params["state"] == STATE
    assert params["iss"] == ISSUER
    grant = Grant.objects.get()
    assert grant.user == user
    assert grant.resource == [settings.TAPROOT_MCP_URL]
    assert grant.code_challenge_method == "S256"


def test_deny_redirects_with_access_denied_and_issues_nothing(claude_flow):
    assert_refused(claude_flow.decide(allow=False), claude_flow, "access_denied")


def test_missing_resource_gets_the_mcp_resource(claude_flow):
    page = claude_flow.consent_page(resource=None)
    assert f"<code>{settings.TAPROOT_MCP_URL}</code>" in page.content.decode().replace("<wbr>", "")
    claude_flow.code(resource=None)
    assert Grant.objects.get().resource == [settings.TAPROOT_MCP_URL]


def test_resource_with_a_trailing_slash_is_the_mcp_resource(claude_flow):
    claude_flow.code(resource=settings.TAPROOT_MCP_URL + "/")
    assert Grant.objects.get().resource == [settings.TAPROOT_MCP_URL]


@pytest.mark.parametrize(
    "resource",
    [
        "http://127.0.0.1:8000",
        "http://127.0.0.1:8000/",
        "http://127.0.0.1:8000/mcp/extra",
        "https://127.0.0.1:8000/mcp",
        "https://other.example/mcp",
        "urn:example:mcp",
        "not a uri",
    ],
)
def test_a_foreign_resource_is_refused_with_invalid_target(claude_flow, resource):
    assert_refused(claude_flow.consent_page(resource=resource), claude_flow, "invalid_target")


def test_a_foreign_resource_among_several_is_refused(claude_flow):
    url = (
        "/o/authorize/?"
        + "&".join(f"{k}={quote(v)}" for k, v in claude_flow.params(resource=None).items())
        + f"&resource={quote(settings.TAPROOT_MCP_URL)}&resource={quote('https://other.example/')}"
    )
    assert_refused(claude_flow.client.get(url), claude_flow, "invalid_target")


def test_a_resource_edited_into_the_consent_form_is_refused(claude_flow):
    response = claude_flow.decide(tamper={"resource": "https://other.example/mcp"})
    assert_refused(response, claude_flow, "invalid_target")


def test_a_resource_removed_from_the_consent_form_still_binds_to_mcp(claude_flow):
    response = claude_flow.decide(tamper={"resource": ""})
    assert "code" in query_of(response["Location"])
    assert Grant.objects.get().resource == [settings.TAPROOT_MCP_URL]


def test_missing_pkce_challenge_is_refused(claude_flow):
    response = claude_flow.consent_page(code_challenge=None, code_challenge_method=None)
    params = assert_refused(response, claude_flow, "invalid_request")
    assert "challenge" in params["error_description"].lower()


@pytest.mark.parametrize("method", ["plain", None])
def test_plain_pkce_is_refused(claude_flow, method):
    response = claude_flow.consent_page(code_challenge_method=method)
    params = assert_refused(response, claude_flow, "invalid_request")
    assert "S256" in params["error_description"]


@pytest.mark.parametrize(
    "challenge", ["short", "a" * 42, "a" * 44, "a" * 128, "a" * 42 + "=", "a" * 42 + "+"]
)
def test_a_challenge_that_is_not_an_s256_digest_is_refused(claude_flow, challenge):
    response = claude_flow.consent_page(code_challenge=challenge)
    params = assert_refused(response, claude_flow, "invalid_request")
    assert "code_challenge" in params["error_description"]


def test_plain_pkce_edited_into_the_consent_form_is_refused(claude_flow):
    response = claude_flow.decide(tamper={"code_challenge_method": "plain"})
    assert_refused(response, claude_flow, "invalid_request")


def test_unknown_scope_is_refused(claude_flow):
    assert_refused(claude_flow.consent_page(scope="mcp admin"), claude_flow, "invalid_scope")


def test_implicit_response_type_is_refused(claude_flow):
    assert_refused(
        claude_flow.consent_page(response_type="token"), claude_flow, "unauthorized_client"
    )


def test_a_redirect_uri_the_client_did_not_register_is_never_followed(claude_flow):
    response = claude_flow.consent_page(redirect_uri="https://attacker.example/cb")
    assert response.status_code == 400
    assert b"can't be completed" in response.content
    assert b"Mismatching redirect URI" in response.content
    assert "attacker" not in response.get("Location", "")
    assert not Grant.objects.exists()


def test_an_unknown_client_is_shown_an_error_page(claude_flow):
    response = claude_flow.consent_page(client_id="no-such-client")
    assert response.status_code == 400
    assert b"Invalid client_id" in response.content


def test_approval_prompt_auto_still_asks_for_consent(claude_flow):
    claude_flow.tokens()
    page = claude_flow.consent_page(approval_prompt="auto")
    assert page.status_code == 200
    assert b"authorizationForm" in page.content


def test_consent_form_with_an_unregistered_client_id_is_an_error_not_a_crash(claude_flow):
    response = claude_flow.decide(tamper={"client_id": "no-such-client"})
    assert response.status_code == 400
    assert not Grant.objects.exists()


def test_a_loopback_client_cannot_authorize_once_loopback_clients_are_off(public_flow):
    with override_settings(TAPROOT_ALLOW_LOOPBACK_CLIENTS=False):
        response = public_flow.consent_page()
    assert response.status_code == 400
    assert b"can't be completed" in response.content
    assert "Location" not in response
    assert not Grant.objects.exists()


def test_a_loopback_client_authorizes_while_loopback_clients_are_on(public_flow):
    with override_settings(TAPROOT_ALLOW_LOOPBACK_CLIENTS=True):
        assert public_flow.code()
