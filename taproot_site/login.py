"""Login throttling: django-axes, told whom to count and how to answer.

Failed logins are counted per account and address together (AXES_LOCKOUT_PARAMETERS in
settings), so someone guessing one account's password from one address locks only that
account from that address: the account's owner elsewhere, and everyone else behind the
same proxy, still get in. Every Django login goes through `authenticate()`, which axes
guards (the sign-in page before the dashboard and the OAuth consent, and the admin's).
"""

import ipaddress
import logging
import math
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from axes.helpers import get_client_username, get_cool_off
from axes.models import AccessAttempt
from django.conf import settings
from django.db.models import Max
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone

from oauth.slowdown import seconds_to_wait
from oauth.throttle import client_ip

logger = logging.getLogger("taproot.login")


def client_address(request: HttpRequest) -> str | None:
    """The address failures are counted for: the OAuth registration limit's rule
    (REMOTE_ADDR, or X-Forwarded-For only from a trusted proxy), an IPv6 address as the
    first address of its /64.

    None when that is not an IP address (a Unix socket): the database column holds only
    addresses, and such requests then share one count per account.
    """
    try:
        ip = ipaddress.ip_address(client_ip(request))
    except ValueError:
        return None
    if ip.version == 6:
        # One host holds a whole /64: counted per address, it could guess for ever.
        return str(ipaddress.ip_network(f"{ip}/64", strict=False).network_address)
    return str(ip)


def locked_until(username: str, address: str | None) -> datetime:
    """When logging in as `username` from `address` is allowed again: the lockout lasts
    AXES_COOLOFF_TIME from the last counted failure."""
    last: datetime | None = AccessAttempt.objects.filter(
        username=username, ip_address=address
    ).aggregate(last=Max("attempt_time"))["last"]
    cool_off: timedelta = get_cool_off()  # settings give axes a cool-off time
    return (last or timezone.now()) + cool_off


def lockout_response(request: HttpRequest, *args: Any) -> HttpResponse:
    """axes' AXES_LOCKOUT_CALLABLE: 429 and a page that says when to try again.

    axes calls it with (request, response, credentials) or, on its asynchronous path,
    (request, credentials); the account is read from the request either way.
    """
    username = get_client_username(request) or ""
    address = getattr(request, "axes_ip_address", None)
    until = locked_until(username, address)
    seconds = max(1, math.ceil((until - timezone.now()).total_seconds()))
    # repr: the name is whatever was typed, line breaks included.
    logger.warning(
        "login refused: too many failures for %r from %s, until %s",
        username,
        address or "an unknown address",
        f"{until:%Y-%m-%d %H:%M:%S} UTC",
    )
    context = {
        "username": username,
        "failure_limit": settings.AXES_FAILURE_LIMIT,
        "until": until,
        "minutes": math.ceil(seconds / 60),
    }
    response = render(request, "registration/locked_out.html", context, status=429)
    response["Retry-After"] = str(seconds)
    # Logged above; Django's "Too Many Requests" warning would say it again, with less.
    response._has_been_logged = True  # type: ignore[attr-defined]
    return response


class LoginSlowdownMiddleware:
    """Answers a sign-in attempt at an account being guessed from many addresses (see
    oauth.slowdown) with 429 and how many seconds to wait, before the password is tried."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.method == "POST" and request.path_info in _login_paths():
            username = request.POST.get("username", "")
            wait = seconds_to_wait(username, now=timezone.now()) if username else 0
            if wait:
                logger.warning(
                    "login slowed: %r waits %d s (many addresses failed)", username, wait
                )
                response = render(
                    request,
                    "registration/slowed_down.html",
                    {"username": username, "seconds": wait},
                    status=429,
                )
                response["Retry-After"] = str(wait)
                response._has_been_logged = True  # type: ignore[attr-defined]
                return response
        return self.get_response(request)


def _login_paths() -> set[str]:
    return {reverse("login"), reverse("admin:login")}
