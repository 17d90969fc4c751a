"""The run command's server (scripts/serve ends in `python -m taproot_site.launch`): it
advertises the address it listens on unless TAPROOT_PUBLIC_URL says otherwise, and then
says so in one line."""

import os
import subprocess
import sys

import httpx2
import pytest

from taproot_site.launch import listens_at, public_url_note
from tests import live_server
from tests.live_server import ROOT, run_server


def resource_metadata(base_url: str) -> dict[str, object]:
    response = httpx2.get(f"{base_url}/.well-known/oauth-protected-resource/mcp", timeout=10)
    assert response.status_code == 200, response.text
    return response.json()


def note_lines(log: str) -> list[str]:
    return [line for line in log.splitlines() if "TAPROOT_PUBLIC_URL" in line]


def issue_token(username: str, env: dict[str, str]) -> str:
    """`manage.py issue_token` as the README shows it, in the server's environment."""
    clean = {k: v for k, v in os.environ.items() if k not in {"TAPROOT_PUBLIC_URL", "HOST"}}
    issued = subprocess.run(
        [sys.executable, "manage.py", "issue_token", "--user", username],
        cwd=ROOT,
        env={**clean, "DATABASE_URL": live_server.test_database_url(), **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert issued.returncode == 0, issued.stderr
    return issued.stdout.strip()


def initialize(base_url: str, token: str) -> httpx2.Response:
    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "run-command-test", "version": "1"},
        },
    }
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream"}
    return httpx2.post(f"{base_url}/mcp", json=message, headers=headers, timeout=10)


# --- Where it listens and what it advertises (TAPROOT_PUBLIC_URL) ----------------------


@pytest.mark.parametrize(
    ("public_url", "host", "port", "here"),
    [
        ("http://127.0.0.1:8000", "127.0.0.1", 8000, True),
        ("http://localhost:8000", "127.0.0.1", 8000, True),
        ("http://127.0.0.1:8000", "0.0.0.0", 8000, True),
        ("http://[::1]:8000", "::", 8000, True),
        ("http://127.0.0.1:8000", "127.0.0.1", 8101, False),
        ("https://127.0.0.1:8000", "127.0.0.1", 8000, False),
        ("https://taproot.example.com", "127.0.0.1", 8000, False),
        ("http://192.0.2.10:8000", "127.0.0.1", 8000, False),
    ],
)
def test_a_public_url_is_here_only_when_it_is_this_machines_address_for_the_port(
    public_url, host, port, here
):
    assert listens_at(public_url, host, port) is here
    assert (public_url_note(public_url, host, port) is None) is here


@pytest.mark.server
@pytest.mark.django_db(transaction=True)
def test_with_port_set_the_run_command_advertises_that_port(tmp_path, user):
    with run_server(tmp_dir=tmp_path, as_run_command=True) as server:
        metadata = resource_metadata(server.url)
        assert metadata["resource"] == f"{server.url}/mcp"
        assert metadata["authorization_servers"] == [server.url]
        root = httpx2.get(f"{server.url}/.well-known/oauth-protected-resource", timeout=10)
        assert root.json()["resource"] == f"{server.url}/mcp"
        issuer = httpx2.get(f"{server.url}/.well-known/oauth-authorization-server", timeout=10)
        assert issuer.json()["issuer"] == server.url
        # A token issued with the same PORT is one this server accepts.
        port = server.url.rsplit(":", 1)[1]
        assert initialize(server.url, issue_token(user.username, {"PORT": port})).status_code == 200
        log = server.log()
    assert f"Taproot is starting on {server.url}/ " in log
    assert note_lines(log) == []


@pytest.mark.server
@pytest.mark.django_db(transaction=True)
def test_a_public_url_other_than_where_it_listens_is_said_in_one_line_at_start(tmp_path):
    env = {"TAPROOT_PUBLIC_URL": "http://127.0.0.1:8000"}
    with run_server(tmp_dir=tmp_path, env=env, as_run_command=True) as server:
        # It is advertised as set: a proxy or tunnel may lead there.
        assert resource_metadata(server.url)["resource"] == "http://127.0.0.1:8000/mcp"
        log = server.log()
    assert note_lines(log) == [
        f"Taproot listens on {server.url} and tells OAuth clients to use "
        "http://127.0.0.1:8000/mcp (TAPROOT_PUBLIC_URL): that address must lead here, "
        "through a proxy or tunnel, or connecting fails; unset TAPROOT_PUBLIC_URL if it "
        f"should be {server.url}."
    ]
