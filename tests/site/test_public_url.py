"""The run command's server (scripts/serve ends in `python -m taproot_site.launch`): it
advertises the address it listens on unless TAPROOT_PUBLIC_URL says otherwise, and then
says so in one line; it believes a forwarded client address only from a proxy it was
told to trust."""

import json
import os
import subprocess
import sys

import httpx2
import pytest
from django.core.cache import cache

from taproot_site.launch import listens_at, public_url_note
from taproot_site.server import proxy_arguments
from tests import live_server
from tests.live_server import ROOT, run_server
from tests.oauth.conftest import CLAUDE_REGISTRATION


def resource_metadata(base_url: str) -> dict[str, object]:
    response = httpx2.get(f"{base_url}/.well-known/oauth-protected-resource/mcp", timeout=10)
    assert response.status_code == 200, response.text
    return response.json()


def note_lines(log: str) -> list[str]:
    return [line for line in log.splitlines() if "TAPROOT_PUBLIC_URL" in line]


def issue_token(username: str, env: dict[str, str]) -> str:
    """`manage.py issue_token` as docs/mcp-tools.md shows it, in the server's environment."""
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


# --- Whom it believes about the client's address (the registration limit) -------------


def test_forwarded_headers_are_believed_only_from_proxies_it_is_told_of():
    assert proxy_arguments({}) == ["--no-proxy-headers"]
    assert proxy_arguments({"FORWARDED_ALLOW_IPS": " "}) == ["--no-proxy-headers"]
    assert proxy_arguments({"TAPROOT_TRUSTED_PROXIES": "10.0.0.0/8"}) == [
        "--proxy-headers",
        "--forwarded-allow-ips",
        "10.0.0.0/8",
    ]
    both = {"FORWARDED_ALLOW_IPS": "127.0.0.1", "TAPROOT_TRUSTED_PROXIES": "10.0.0.0/8"}
    assert proxy_arguments(both) == ["--proxy-headers", "--forwarded-allow-ips", "127.0.0.1"]


def register_as(base_url: str, forwarded_for: str) -> httpx2.Response:
    return httpx2.post(
        f"{base_url}/o/register/",
        content=json.dumps(CLAUDE_REGISTRATION),
        headers={"Content-Type": "application/json", "X-Forwarded-For": forwarded_for},
        timeout=10,
    )


@pytest.mark.server
@pytest.mark.django_db(transaction=True)
def test_a_forwarded_address_from_loopback_does_not_move_the_registration_limit(tmp_path):
    cache.clear()
    env = {"TAPROOT_REGISTRATION_LIMIT": "1"}
    with run_server(tmp_dir=tmp_path, env=env, as_run_command=True) as server:
        assert register_as(server.url, "203.0.113.1").status_code == 201
        # Claiming to be someone else does not buy another registration.
        refused = register_as(server.url, "203.0.113.2")
        assert refused.status_code == 429, refused.text
        log = server.wait_for_log("registration throttled")
    assert "registration throttled for 127.0.0.1" in log
    assert "ip=203.0.113" not in log


@pytest.mark.server
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("variable", ["FORWARDED_ALLOW_IPS", "TAPROOT_TRUSTED_PROXIES"])
def test_behind_a_trusted_proxy_the_forwarded_client_address_is_counted(tmp_path, variable):
    cache.clear()
    env = {"TAPROOT_REGISTRATION_LIMIT": "1", variable: "127.0.0.1"}
    with run_server(tmp_dir=tmp_path, env=env, as_run_command=True) as server:
        assert register_as(server.url, "203.0.113.1").status_code == 201
        assert register_as(server.url, "203.0.113.2").status_code == 201
        # What the client put in front of the proxy's entry is not believed.
        refused = register_as(server.url, "198.51.100.9, 203.0.113.1")
        assert refused.status_code == 429, refused.text
        log = server.wait_for_log("registration throttled")
    assert "registration throttled for 203.0.113.1" in log
