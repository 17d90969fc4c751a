import pytest
from django.test import override_settings

from tests.oauth.conftest import PUBLIC_REGISTRATION, register

pytestmark = pytest.mark.django_db

INSPECTOR = "http://localhost:6274"


def preflight(client, path: str, origin: str):
    return client.options(
        path,
        HTTP_ORIGIN=origin,
        HTTP_ACCESS_CONTROL_REQUEST_METHOD="POST",
        HTTP_ACCESS_CONTROL_REQUEST_HEADERS="content-type",
    )


@override_settings(TAPROOT_ALLOW_LOOPBACK_CLIENTS=True)
@pytest.mark.parametrize("path", ["/o/register/", "/o/token/", "/o/revoke_token/"])
def test_a_local_browser_client_may_call_the_oauth_endpoints(client, path):
    response = preflight(client, path, INSPECTOR)
    assert response.status_code == 204
    assert response["Access-Control-Allow-Origin"] == INSPECTOR
    assert "POST" in response["Access-Control-Allow-Methods"]
    assert "Content-Type" in response["Access-Control-Allow-Headers"]
    assert "Access-Control-Allow-Credentials" not in response


@override_settings(TAPROOT_ALLOW_LOOPBACK_CLIENTS=True)
def test_the_registration_reply_is_readable_by_the_local_page(client):
    response = register(client, PUBLIC_REGISTRATION, HTTP_ORIGIN="http://127.0.0.1:6274")
    assert response.status_code == 201
    assert response["Access-Control-Allow-Origin"] == "http://127.0.0.1:6274"
    assert "Origin" in response["Vary"]


@override_settings(TAPROOT_ALLOW_LOOPBACK_CLIENTS=True)
@pytest.mark.parametrize(
    "origin", ["https://evil.example", "http://localhost.evil.example:6274", "null", ""]
)
def test_other_origins_get_no_cors_headers(client, origin):
    response = preflight(client, "/o/token/", origin)
    assert "Access-Control-Allow-Origin" not in response


@override_settings(TAPROOT_ALLOW_LOOPBACK_CLIENTS=False)
def test_no_cors_when_loopback_clients_are_off(client):
    response = preflight(client, "/o/register/", INSPECTOR)
    assert "Access-Control-Allow-Origin" not in response


@override_settings(TAPROOT_ALLOW_LOOPBACK_CLIENTS=True)
def test_the_consent_page_is_never_cross_origin(client):
    response = preflight(client, "/o/authorize/", INSPECTOR)
    assert "Access-Control-Allow-Origin" not in response
