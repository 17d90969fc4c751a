"""Slowing down guesses at one account from many addresses.

django-axes (taproot_site.login) counts failures per account and address, so someone
with many addresses (or one IPv6 /64, which is 2^64 of them) could guess forever. Here
failures are counted per account across addresses: after SLOWDOWN_AFTER of them from at
least SLOWDOWN_NETWORKS networks within SLOWDOWN_WINDOW, each further attempt at that
account must wait a delay that doubles with each failure, up to MAX_WAIT, counted from
the last failure. It always expires, so the owner is never locked out: the right password
after the wait signs in. The owner is told what happened when they next sign in.
"""

import ipaddress
import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.contrib import messages
from django.db.models import Count, Max, Min
from django.http import HttpRequest
from django.utils import timezone

from oauth.models import LoginFailure
from oauth.throttle import client_ip

SLOWDOWN_AFTER = 10
SLOWDOWN_NETWORKS = 3
SLOWDOWN_WINDOW = timedelta(hours=1)
MAX_WAIT = timedelta(minutes=5)


def network_of(address: str | None) -> str:
    """`address` as failures are counted: an IPv6 address as its /64, an IPv4 as itself."""
    if not address:
        return ""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return ""
    if ip.version == 6:
        return str(ipaddress.ip_network(f"{ip}/64", strict=False))
    return str(ip)


@dataclass(frozen=True)
class Failures:
    count: int
    networks: int
    first: datetime | None
    last: datetime | None


def failures_for(username: str, *, since: datetime) -> Failures:
    found = LoginFailure.objects.filter(username=username, at__gte=since).aggregate(
        count=Count("id"),
        networks=Count("network", distinct=True),
        first=Min("at"),
        last=Max("at"),
    )
    return Failures(found["count"], found["networks"], found["first"], found["last"])


def record_failure(username: str, address: str | None, *, now: datetime) -> None:
    LoginFailure.objects.filter(at__lt=now - SLOWDOWN_WINDOW).delete()
    LoginFailure.objects.create(username=username[:150], network=network_of(address), at=now)


def seconds_to_wait(username: str, *, now: datetime) -> int:
    """How long an attempt at `username` must wait now; 0 when it may go ahead."""
    seen = failures_for(username, since=now - SLOWDOWN_WINDOW)
    if seen.count < SLOWDOWN_AFTER or seen.networks < SLOWDOWN_NETWORKS or seen.last is None:
        return 0
    excess = min(seen.count - SLOWDOWN_AFTER, 20)
    delay = min(timedelta(seconds=2**excess), MAX_WAIT)
    remaining = (seen.last + delay - now).total_seconds()
    return max(0, math.ceil(remaining))


def report_and_forget(username: str, *, now: datetime) -> Failures | None:
    """The failures to tell the owner about as they sign in (None when there were too few
    to have slowed anything), forgotten once read."""
    seen = failures_for(username, since=now - SLOWDOWN_WINDOW)
    LoginFailure.objects.filter(username=username).delete()
    if seen.count < SLOWDOWN_AFTER or seen.networks < SLOWDOWN_NETWORKS:
        return None
    return seen


def on_login_failed(
    sender: Any, credentials: dict[str, Any], request: HttpRequest | None = None, **kwargs: Any
) -> None:
    """Django's user_login_failed: count the failure for the account."""
    username = credentials.get("username")
    if not username or request is None:
        return
    record_failure(str(username), client_ip(request), now=timezone.now())


def on_logged_in(sender: Any, request: HttpRequest, user: Any, **kwargs: Any) -> None:
    """Django's user_logged_in: tell the owner how their account was guessed at."""
    seen = report_and_forget(user.get_username(), now=timezone.now())
    if seen is None or seen.first is None:
        return
    messages.warning(
        request,
        f"Since {seen.first:%Y-%m-%d %H:%M} UTC, signing in as you failed {seen.count} "
        f"times from {seen.networks} different addresses, so each attempt was made to wait. "
        "If that was not you, someone is guessing your password: make sure it is long and "
        "used nowhere else.",
    )
