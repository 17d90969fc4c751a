import base64
import logging

import pytest

from tests.oauth.conftest import CLAUDE_REGISTRATION, register

pytestmark = pytest.mark.django_db

LOGGER = "taproot.oauth.requests"


def lines(caplog) -> list[str]:
    return [record.getMessage() for record in caplog.records if record.name == LOGGER]


def test_metadata_requests_are_logged_with_status_and_duration(client, caplog):
    with caplog.at_level(logging.INFO, logger=LOGGER):
        client.get("/.well-known/oauth-authorization-server")
    (line,) = lines(caplog)
    assert line.startswith("GET /.well-known/oauth-authorization-server 200 ")
    assert "ms client=- ip=127.0.0.1" in line


def test_registration_logs_the_new_client_id_but_not_its_secrets(client, caplog):
    with caplog.at_level(logging.INFO, logger=LOGGER):
        body = register(client, CLAUDE_REGISTRATION).json()
    (line,) = lines(caplog)
    assert line.startswith("POST /o/register/ 201 ")
    assert f"client={body['client_id']}" in line
    everything = caplog.text
    assert body["client_secret"] not in everything
    assert body["registration_access_token"] not in everything


def test_the_consent_and_token_steps_log_the_client_but_never_codes_or_tokens(claude_flow, caplog):
    client_id = claude_flow.registered.client_id
    with caplog.at_level(logging.INFO, logger=LOGGER):
        code = claude_flow.code()
        tokens = claude_flow.exchange(code).json()
        claude_flow.refresh(tokens["refresh_token"])
    logged = lines(caplog)
    assert [line.split(" ")[:3] for line in logged] == [
        ["GET", "/o/authorize/", "200"],
        ["POST", "/o/authorize/", "302"],
        ["POST", "/o/token/", "200"],
        ["POST", "/o/token/", "200"],
    ]
    assert all(f"client={client_id}" in line for line in logged)
    everything = caplog.text
    for secret in (code, tokens["access_token"], tokens["refresh_token"], claude_flow.verifier):
        assert secret not in everything
    assert claude_flow.registered.client_secret not in everything
    assert "state-Zx81" not in everything


def test_basic_auth_names_the_client_without_logging_the_secret(client, caplog):
    credentials = base64.b64encode(b"some-client:some-secret").decode()
    with caplog.at_level(logging.INFO, logger=LOGGER):
        client.post(
            "/o/token/", {"grant_type": "refresh_token"}, HTTP_AUTHORIZATION=f"Basic {credentials}"
        )
    (line,) = lines(caplog)
    assert "client=some-client" in line
    assert "some-secret" not in caplog.text


def test_other_paths_are_not_logged_here(client, caplog):
    with caplog.at_level(logging.INFO, logger=LOGGER):
        client.get("/healthz")
        client.get("/accounts/login/")
    assert lines(caplog) == []


def about(caplog, path: str) -> list[str]:
    """Every record, from any logger, that names `path`."""
    return [
        f"{record.name}: {record.getMessage()}"
        for record in caplog.records
        if path in record.getMessage()
    ]


def test_a_refused_refresh_is_logged_once(claude_flow, caplog):
    tokens = claude_flow.tokens()
    claude_flow.refresh(tokens["refresh_token"])
    caplog.clear()
    with caplog.at_level(logging.INFO):
        replayed = claude_flow.refresh(tokens["refresh_token"])
    assert replayed.status_code == 400
    (line,) = about(caplog, "/o/token/")
    assert line.startswith(f"{LOGGER}: POST /o/token/ 400 ")


def test_a_server_error_is_still_logged_by_django(client, caplog, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("the token view broke")

    monkeypatch.setattr("oauth2_provider.views.TokenView.post", broken)
    client.raise_request_exception = False
    with caplog.at_level(logging.INFO):
        assert client.post("/o/token/", {"grant_type": "refresh_token"}).status_code == 500
    logged = about(caplog, "/o/token/")
    assert any(line.startswith("django.request: Internal Server Error") for line in logged)
