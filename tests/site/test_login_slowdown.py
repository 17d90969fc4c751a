"""Guessing one account's password from many addresses (oauth.slowdown): after 10
failures from 3 or more networks within the hour, each further attempt at that account
waits a delay that doubles with each failure, up to 5 minutes, and always expires; the
owner is then told, on the dashboard, what happened."""

from datetime import timedelta

import pytest
from django.db.models import F
from django.utils import timezone

from oauth.models import LoginFailure
from oauth.slowdown import MAX_WAIT, seconds_to_wait
from tests.page_text import page_text
from tests.site.test_login_throttle import LOGINS, PASSWORD, alice, fail, log_in, logged_in

pytestmark = pytest.mark.django_db

__all__ = ["alice"]  # the fixture, used by name

ADDRESSES = ["198.51.100.1", "198.51.100.2", "203.0.113.3", "203.0.113.4"]


def guessed_at(times_each: int = 9) -> list[int]:
    """36 wrong passwords from 4 addresses: each address stays under axes' limit of 10,
    and once 3 addresses have failed 10 times in all, the attempts are made to wait."""
    said = [
        code for address in ADDRESSES for code in fail("dashboard", times_each, address=address)
    ]
    assert said[:19] == [200] * 19 and set(said[19:]) == {429}
    return said


def time_passes(delta: timedelta) -> None:
    LoginFailure.objects.update(at=F("at") - delta)


@pytest.mark.parametrize("login", LOGINS)
def test_many_addresses_guessing_one_account_make_the_next_attempt_wait(alice, login):
    guessed_at()

    refused = log_in(login, "alice", PASSWORD, address="192.0.2.50")

    assert refused.status_code == 429
    assert "_auth_user_id" not in refused.wsgi_request.session
    wait = int(refused["Retry-After"])
    assert 0 < wait <= MAX_WAIT.total_seconds()
    assert f"Try again in {wait} seconds" in page_text(refused.content.decode())


def test_after_the_wait_the_right_password_signs_the_owner_in(alice):
    guessed_at()
    time_passes(MAX_WAIT)

    assert logged_in(log_in("dashboard", "alice", PASSWORD, address="192.0.2.50"), "dashboard")


def test_the_delay_grows_with_each_failure_and_expires():
    now = timezone.now()
    for n in range(10):
        LoginFailure.objects.create(username="alice", network=ADDRESSES[n % 3], at=now)

    waits = []
    for _ in range(4):
        waits.append(seconds_to_wait("alice", now=now))
        LoginFailure.objects.create(username="alice", network=ADDRESSES[0], at=now)
    assert waits == [1, 2, 4, 8]
    assert seconds_to_wait("alice", now=now + timedelta(seconds=16)) == 0
    for _ in range(30):
        LoginFailure.objects.create(username="alice", network=ADDRESSES[0], at=now)
    assert seconds_to_wait("alice", now=now) == MAX_WAIT.total_seconds()


def test_failures_from_one_address_do_not_slow_the_account_elsewhere(alice):
    fail("dashboard", 9, address=ADDRESSES[0])
    assert logged_in(log_in("dashboard", "alice", PASSWORD, address=ADDRESSES[1]), "dashboard")


def test_one_ipv6_64_counts_as_one_address(alice):
    # Ten hosts of one /64 are one address to axes: the eleventh is refused.
    for host in range(1, 11):
        log_in("dashboard", "alice", "wrong", address=f"2001:db8:1:2::{host:x}")
    assert log_in("dashboard", "alice", PASSWORD, address="2001:db8:1:2::ff").status_code == 429
    assert set(LoginFailure.objects.values_list("network", flat=True)) == {"2001:db8:1:2::/64"}


def test_the_owner_is_told_on_the_dashboard_after_signing_in(alice):
    guessed_at()
    time_passes(MAX_WAIT)
    first = LoginFailure.objects.order_by("at").first().at
    assert LoginFailure.objects.count() == 19  # the refused attempts were never tried

    signed_in = log_in("dashboard", "alice", PASSWORD, address="192.0.2.50")
    page = signed_in.client.get("/dashboard/")

    text = page_text(page.content.decode())
    assert f"Since {first:%Y-%m-%d %H:%M} UTC" in text
    assert "failed 19 times from 3 different addresses" in text
    assert not LoginFailure.objects.exists()  # told once
    assert "failed 19 times" not in page_text(signed_in.client.get("/dashboard/").content.decode())
