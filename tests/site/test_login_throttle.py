"""Login throttling (django-axes, taproot_site.login): after 10 failed logins for one
account from one address within 15 minutes, that account is refused from that address
with a 429 page that says when to try again; other accounts and other addresses are not
affected. It covers the sign-in page before the dashboard, the one before OAuth consent,
and the admin's."""

import io
import logging
import re
from datetime import timedelta
from unittest import mock
from urllib.parse import urlencode

import httpx2
import pytest
from axes.models import AccessAttempt
from django.core.management import call_command
from django.db.models import F
from django.test import Client

from tests.hashers import FastPBKDF2PasswordHasher
from tests.live_server import run_server
from tests.oauth.browser import read_form

pytestmark = pytest.mark.django_db

PASSWORD = "pw-alice-123"
HERE = "198.51.100.20"
ELSEWHERE = "198.51.100.99"
CONSENT_NEXT = "/o/authorize/?" + urlencode(
    {"client_id": "some-client", "response_type": "code", "state": "s"}
)

# Where each login form posts, and where a successful login leads.
LOGINS = {
    "dashboard": ("/accounts/login/", {"next": "/dashboard/"}, "/dashboard/"),
    "consent": ("/accounts/login/", {"next": CONSENT_NEXT}, CONSENT_NEXT),
    "admin": ("/admin/login/", {"next": "/admin/"}, "/admin/"),
}


@pytest.fixture
def alice(django_user_model):
    return django_user_model.objects.create_superuser(username="alice", password=PASSWORD)


def log_in(login: str, username: str, password: str, *, address: str = HERE, **headers):
    path, extra, _ = LOGINS[login]
    client = Client(REMOTE_ADDR=address, **headers)
    return client.post(path, {"username": username, "password": password, **extra})


def fail(login: str, times: int, *, username: str = "alice", address: str = HERE) -> list[int]:
    return [log_in(login, username, "wrong", address=address).status_code for _ in range(times)]


def logged_in(response, login: str) -> bool:
    return response.status_code == 302 and response["Location"] == LOGINS[login][2]


@pytest.mark.parametrize("login", LOGINS)
def test_ten_failures_lock_the_account_from_that_address(alice, login):
    # Nine wrong passwords are told so; the tenth is told the account is now locked.
    assert fail(login, 9) == [200] * 9
    assert fail(login, 1) == [429]
    # The eleventh try is refused, the right password too.
    refused = log_in(login, "alice", PASSWORD)
    assert refused.status_code == 429
    assert "_auth_user_id" not in refused.wsgi_request.session


@pytest.mark.parametrize("login", LOGINS)
def test_below_the_limit_the_right_password_still_works(alice, login):
    assert fail(login, 9) == [200] * 9
    assert logged_in(log_in(login, "alice", PASSWORD), login)


def test_the_lockout_page_says_when_to_try_again(alice):
    fail("dashboard", 10)
    page = log_in("dashboard", "alice", PASSWORD)
    assert page.status_code == 429
    assert page["Content-Type"].startswith("text/html")
    until = AccessAttempt.objects.get(username="alice").attempt_time + timedelta(minutes=15)
    assert 14 * 60 < int(page["Retry-After"]) <= 15 * 60
    html = page.content.decode()
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))
    assert "Too many failed logins" in text
    assert f"Try again after {until:%H:%M} UTC (in 15 minutes)" in text
    assert "/static/css/taproot.css" in html  # the site's own page, styled


def test_the_lockout_page_escapes_the_account_name(django_user_model):
    name = "<b>eve</b>"
    django_user_model.objects.create_user(username=name, password=PASSWORD)
    fail("dashboard", 10, username=name)
    html = log_in("dashboard", name, PASSWORD).content.decode()
    assert "&lt;b&gt;eve&lt;/b&gt;" in html
    assert "<b>eve</b>" not in html


@pytest.mark.parametrize("login", LOGINS)
def test_another_account_from_the_same_address_still_gets_in(alice, django_user_model, login):
    django_user_model.objects.create_superuser(username="bob", password="pw-bob-123")
    fail(login, 10)
    assert logged_in(log_in(login, "bob", "pw-bob-123"), login)


@pytest.mark.parametrize("login", LOGINS)
def test_the_same_account_from_another_address_still_gets_in(alice, login):
    fail(login, 10)
    assert logged_in(log_in(login, "alice", PASSWORD, address=ELSEWHERE), login)


def test_failures_on_every_login_page_count_together(alice):
    for login in ("dashboard", "consent", "admin"):
        fail(login, 3)
    assert fail("admin", 1) == [429]
    assert log_in("consent", "alice", PASSWORD).status_code == 429


def test_after_the_lockout_time_the_right_password_works(alice):
    fail("dashboard", 10)
    assert log_in("dashboard", "alice", PASSWORD).status_code == 429
    # Sixteen minutes pass.
    AccessAttempt.objects.update(attempt_time=F("attempt_time") - timedelta(minutes=16))
    assert logged_in(log_in("dashboard", "alice", PASSWORD), "dashboard")


def test_a_try_while_locked_out_neither_checks_the_password_nor_extends_the_lockout(alice):
    fail("dashboard", 10)
    before = AccessAttempt.objects.get(username="alice")
    with mock.patch.object(
        FastPBKDF2PasswordHasher, "verify", autospec=True, return_value=True
    ) as verify:
        assert log_in("dashboard", "alice", "wrong").status_code == 429
    verify.assert_not_called()
    after = AccessAttempt.objects.get(username="alice")
    assert (after.failures_since_start, after.attempt_time) == (10, before.attempt_time)


def test_a_successful_login_clears_the_count(alice):
    fail("dashboard", 9)
    assert logged_in(log_in("dashboard", "alice", PASSWORD), "dashboard")
    assert fail("dashboard", 9) == [200] * 9


def test_the_limit_and_the_lockout_time_are_settings(alice, settings):
    settings.AXES_FAILURE_LIMIT = 3
    settings.AXES_COOLOFF_TIME = timedelta(minutes=2)
    assert fail("dashboard", 3) == [200, 200, 429]
    page = log_in("dashboard", "alice", PASSWORD)
    assert 60 < int(page["Retry-After"]) <= 120
    assert "(in 2 minutes)" in page.content.decode()


# --- Whose address counts: the registration limit's rule ------------------------------


def test_a_forwarded_address_from_an_untrusted_peer_is_not_believed(alice):
    # Claiming a new address in each request does not buy more tries.
    for n in range(9):
        log_in("dashboard", "alice", "wrong", HTTP_X_FORWARDED_FOR=f"203.0.113.{n}")
    assert (
        log_in("dashboard", "alice", "wrong", HTTP_X_FORWARDED_FOR="203.0.113.200").status_code
        == 429
    )
    assert set(AccessAttempt.objects.values_list("ip_address", flat=True)) == {HERE}


def test_behind_a_trusted_proxy_each_client_is_counted_apart(alice, settings):
    settings.TAPROOT_TRUSTED_PROXIES = ["10.0.0.1"]
    proxy = {"address": "10.0.0.1"}
    for _ in range(10):
        log_in("dashboard", "alice", "wrong", HTTP_X_FORWARDED_FOR="203.0.113.1", **proxy)
    # The attacker behind the proxy is locked out ...
    assert (
        log_in(
            "dashboard", "alice", PASSWORD, HTTP_X_FORWARDED_FOR="203.0.113.1", **proxy
        ).status_code
        == 429
    )
    # ... the owner behind the same proxy is not, and what a client writes in front of
    # the proxy's entry is not believed.
    owner = log_in(
        "dashboard", "alice", PASSWORD, HTTP_X_FORWARDED_FOR="203.0.113.1, 203.0.113.7", **proxy
    )
    assert logged_in(owner, "dashboard")
    assert set(AccessAttempt.objects.values_list("ip_address", flat=True)) == {"203.0.113.1"}


# --- Over real HTTP, through uvicorn and Django's asynchronous handler -----------------


def form_login(http: httpx2.Client, base_url: str, path: str, password: str) -> httpx2.Response:
    page = http.get(f"{base_url}{path}")
    assert page.status_code == 200, page.text
    _, fields = read_form(page.text, "login-form")
    fields.update(username="alice", password=password)
    return http.post(f"{base_url}{path}", data=fields, headers={"Referer": str(page.url)})


@pytest.mark.server
@pytest.mark.django_db(transaction=True)
def test_the_running_server_locks_out_and_says_when(alice, tmp_path):
    env = {"TAPROOT_LOGIN_FAILURE_LIMIT": "3"}
    with (
        run_server(tmp_dir=tmp_path, env=env) as server,
        httpx2.Client(timeout=30) as http,
    ):
        path = "/accounts/login/?next=/dashboard/"
        answers = [form_login(http, server.url, path, "wrong").status_code for _ in range(3)]
        refused = form_login(http, server.url, path, PASSWORD)
    assert answers == [200, 200, 429]
    assert refused.status_code == 429
    assert int(refused.headers["retry-after"]) > 14 * 60
    assert "Try again after" in refused.text


def test_the_readme_s_command_lifts_a_lockout_early(alice):
    fail("dashboard", 10)
    call_command("axes_reset_username", "alice", stdout=io.StringIO())
    assert logged_in(log_in("dashboard", "alice", PASSWORD), "dashboard")


def test_each_refusal_is_logged_once_naming_the_account_and_address(alice, caplog):
    with caplog.at_level(logging.INFO):
        fail("dashboard", 9)
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []
    caplog.clear()
    with caplog.at_level(logging.INFO):
        log_in("dashboard", "alice", "wrong")
    (line,) = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert line.startswith(f"login refused: too many failures for 'alice' from {HERE}, until ")
