"""System checks for the OAuth settings that are easy to get subtly wrong."""

import ipaddress
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.core import checks

from oauth.redirects import is_loopback_http


@checks.register(checks.Tags.security)
def check_public_url(app_configs: Any, **kwargs: Any) -> list[checks.CheckMessage]:
    url = settings.TAPROOT_PUBLIC_URL
    parts = urlsplit(url)
    if (
        parts.scheme in {"http", "https"}
        and parts.hostname
        and not (parts.path or parts.query or parts.fragment or parts.username)
    ):
        return []
    return [
        checks.Error(
            "TAPROOT_PUBLIC_URL must be an origin such as https://taproot.example.com "
            f"(got {url!r}).",
            hint="The OAuth documents live at the origin's root (RFC 8414, RFC 9728): "
            "serve Taproot at the root of its own host name, without a path.",
            id="taproot_oauth.E001",
        )
    ]


@checks.register(checks.Tags.security)
def check_extra_redirect_uris(app_configs: Any, **kwargs: Any) -> list[checks.CheckMessage]:
    errors: list[checks.CheckMessage] = []
    for uri in settings.TAPROOT_EXTRA_REDIRECT_URIS:
        parts = urlsplit(uri)
        if (
            "#" in uri
            or not parts.hostname
            or not (parts.scheme == "https" or is_loopback_http(uri))
        ):
            errors.append(
                checks.Error(
                    f"TAPROOT_EXTRA_REDIRECT_URIS holds {uri!r}, which cannot be a redirect URI.",
                    hint="Use absolute https URIs without a fragment "
                    "(http only on a loopback address).",
                    id="taproot_oauth.E002",
                )
            )
        elif parts.scheme == "http" and not settings.TAPROOT_ALLOW_LOOPBACK_CLIENTS:
            errors.append(
                checks.Error(
                    f"TAPROOT_EXTRA_REDIRECT_URIS holds the loopback URI {uri!r}, but loopback "
                    "clients are turned off.",
                    hint="Turn on TAPROOT_ALLOW_LOOPBACK_CLIENTS or remove the URI.",
                    id="taproot_oauth.E003",
                )
            )
    return errors


@checks.register(checks.Tags.security)
def check_trusted_proxies(app_configs: Any, **kwargs: Any) -> list[checks.CheckMessage]:
    errors: list[checks.CheckMessage] = []
    for item in settings.TAPROOT_TRUSTED_PROXIES:
        try:
            ipaddress.ip_network(item, strict=False)
        except ValueError:
            errors.append(
                checks.Error(
                    f"TAPROOT_TRUSTED_PROXIES holds {item!r}, which is not an IP address "
                    "or network.",
                    id="taproot_oauth.E004",
                )
            )
    return errors


@checks.register(checks.Tags.security, deploy=True)
def check_public_url_is_https(app_configs: Any, **kwargs: Any) -> list[checks.CheckMessage]:
    if settings.TAPROOT_PUBLIC_URL.startswith("https://"):
        return []
    return [
        checks.Warning(
            "TAPROOT_PUBLIC_URL is not https: Claude.ai only connects to https servers, and "
            "tokens would travel in the clear.",
            hint="Put Taproot behind a TLS-terminating proxy or tunnel and set "
            "TAPROOT_PUBLIC_URL to its https address.",
            id="taproot_oauth.W001",
        )
    ]
