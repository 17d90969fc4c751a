"""Over real HTTP against the run command's server (scripts/serve's last step): a request
counts as HTTPS only when a trusted proxy says so. X-Forwarded-Proto from anyone else,
loopback included, is not believed, by uvicorn or by Django; and an HTTPS public URL
gets HSTS by default."""

import httpx2
import pytest

from tests.live_server import run_server

pytestmark = [pytest.mark.server, pytest.mark.django_db(transaction=True)]

PUBLIC = {
    "DEBUG": "0",
    "SECRET_KEY": "a-long-random-production-secret-key-used-only-by-this-test-0123456789",
    "TAPROOT_PUBLIC_URL": "https://taproot.example.com",
    "TAPROOT_ALLOW_LOOPBACK_CLIENTS": "0",
}
THIRTY_DAYS = 60 * 60 * 24 * 30


def login_page(base_url: str, **headers: str) -> httpx2.Response:
    return httpx2.get(f"{base_url}/accounts/login/", headers=headers, timeout=10)


def test_with_no_proxy_named_a_forwarded_https_from_loopback_is_not_believed(tmp_path):
    with run_server(tmp_dir=tmp_path, env=PUBLIC, as_run_command=True) as server:
        claimed = login_page(server.url, **{"X-Forwarded-Proto": "https"})
    # Plain HTTP, as it came: sent on to HTTPS, and no HSTS over plain HTTP.
    assert claimed.status_code == 301, claimed.text
    assert claimed.headers["location"].startswith("https://")
    assert "strict-transport-security" not in claimed.headers


@pytest.mark.parametrize("variable", ["FORWARDED_ALLOW_IPS", "TAPROOT_TRUSTED_PROXIES"])
def test_a_trusted_proxy_is_believed_and_https_gets_hsts(tmp_path, variable):
    env = {**PUBLIC, variable: "127.0.0.1"}
    with run_server(tmp_dir=tmp_path, env=env, as_run_command=True) as server:
        https = login_page(server.url, **{"X-Forwarded-Proto": "https"})
        plain = login_page(server.url)
    assert https.status_code == 200, https.text
    assert https.headers["strict-transport-security"] == f"max-age={THIRTY_DAYS}"
    # The same proxy forwarding a plain HTTP request is sent on to HTTPS.
    assert plain.status_code == 301
    assert plain.headers["location"].startswith("https://")
