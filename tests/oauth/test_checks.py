import os
import subprocess
import sys

import pytest
from django.test import override_settings

from oauth import checks
from tests import live_server
from tests.live_server import ROOT

PRODUCTION = {
    "DEBUG": "0",
    "SECRET_KEY": "a-long-random-production-secret-key-used-only-by-this-test-0123456789",
    "TAPROOT_PUBLIC_URL": "https://taproot.example.com",
    "ALLOWED_HOSTS": "taproot.example.com",
    "TAPROOT_ALLOW_LOOPBACK_CLIENTS": "0",
}


def run_manage(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """manage.py in a process of its own, on the test database: Django's checks of generated
    columns (memories.Memory.id_prefix) ask the database what it supports."""
    child_env = {k: v for k, v in os.environ.items() if not k.startswith("TAPROOT_")}
    child_env.pop("DJANGO_SETTINGS_MODULE", None)
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env={**child_env, "DATABASE_URL": live_server.test_database_url(), **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.django_db(transaction=True)
def test_deploy_check_with_production_settings_has_nothing_from_the_oauth_server():
    result = run_manage("check", "--deploy", "--fail-level", "ERROR", env=PRODUCTION)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "oauth2_provider." not in output
    assert "taproot_oauth." not in output


@pytest.mark.django_db(transaction=True)
def test_deploy_check_warns_when_loopback_clients_are_turned_on_in_production():
    result = run_manage(
        "check", "--deploy", env={**PRODUCTION, "TAPROOT_ALLOW_LOOPBACK_CLIENTS": "1"}
    )
    assert "oauth2_provider.W008" in result.stdout + result.stderr


@pytest.mark.django_db(transaction=True)
def test_production_settings_drop_http_redirects():
    script = (
        "import django; django.setup();"
        "from oauth2_provider.settings import oauth2_settings as s;"
        "print(s.ALLOWED_REDIRECT_URI_SCHEMES)"
    )
    result = run_manage("shell", "--no-imports", "-c", script, env=PRODUCTION)
    assert result.stdout.strip() == "['https']", result.stderr


@override_settings(TAPROOT_PUBLIC_URL="https://taproot.example.com/taproot")
def test_public_url_with_a_path_is_an_error():
    assert [m.id for m in checks.check_public_url(None)] == ["taproot_oauth.E001"]


@override_settings(TAPROOT_PUBLIC_URL="https://taproot.example.com")
def test_public_url_origin_passes():
    assert checks.check_public_url(None) == []
    assert checks.check_public_url_is_https(None) == []


@override_settings(TAPROOT_PUBLIC_URL="http://taproot.example.com")
def test_plain_http_public_url_is_a_deploy_warning():
    assert [m.id for m in checks.check_public_url_is_https(None)] == ["taproot_oauth.W001"]


@pytest.mark.parametrize(
    ("uris", "loopback", "ids"),
    [
        (["https://agent.example.org/cb"], False, []),
        (["https://agent.example.org/cb#x"], False, ["taproot_oauth.E002"]),
        (["javascript:alert(1)"], False, ["taproot_oauth.E002"]),
        (["http://agent.example.org/cb"], False, ["taproot_oauth.E002"]),
        (["http://127.0.0.1:9000/cb"], False, ["taproot_oauth.E003"]),
        (["http://127.0.0.1:9000/cb"], True, []),
    ],
)
def test_extra_redirect_uris_are_checked(uris, loopback, ids):
    with override_settings(
        TAPROOT_EXTRA_REDIRECT_URIS=uris, TAPROOT_ALLOW_LOOPBACK_CLIENTS=loopback
    ):
        assert [m.id for m in checks.check_extra_redirect_uris(None)] == ids


@override_settings(TAPROOT_TRUSTED_PROXIES=["10.0.0.0/8", "::1", "proxy.internal"])
def test_trusted_proxies_must_be_addresses():
    messages = checks.check_trusted_proxies(None)
    assert [m.id for m in messages] == ["taproot_oauth.E004"]
    assert "proxy.internal" in messages[0].msg
