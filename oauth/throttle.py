"""Per-address limits for anonymous endpoints, counted in the shared database cache.

The counter lives in the default cache (the database cache), so every worker and every
host behind a load balancer counts against the same budget. Counting uses fixed windows;
two workers racing on the same key may each let one extra request through, which is
acceptable for abuse control.
"""

import ipaddress
import time
from dataclasses import dataclass

from django.conf import settings
from django.core.cache import cache
from django.http import HttpRequest

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def _parse_address(value: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(value.strip())
    except ValueError:
        return None


def trusted_proxy_networks() -> list[Network]:
    return [ipaddress.ip_network(item, strict=False) for item in settings.TAPROOT_TRUSTED_PROXIES]


def _is_trusted(address: str, networks: list[Network]) -> bool:
    parsed = _parse_address(address)
    return parsed is not None and any(parsed in network for network in networks)


def client_ip(request: HttpRequest) -> str:
    """The caller's address: REMOTE_ADDR, or X-Forwarded-For only behind a trusted proxy.

    When the direct peer is one of TAPROOT_TRUSTED_PROXIES, the forwarded chain is read
    from the right and the first address that is not itself a trusted proxy wins; the
    left-most entries are whatever the client claimed and are never believed.
    """
    remote = request.META.get("REMOTE_ADDR", "") or "unknown"
    networks = trusted_proxy_networks()
    if not networks or not _is_trusted(remote, networks):
        return remote
    forwarded: str = request.META.get("HTTP_X_FORWARDED_FOR", "")
    for hop in reversed([part.strip() for part in forwarded.split(",") if part.strip()]):
        if _parse_address(hop) is None:
            break
        if not _is_trusted(hop, networks):
            return hop
    return remote


@dataclass(frozen=True)
class Verdict:
    allowed: bool
    retry_after: int


def hit(bucket: str, key: str, *, limit: int, window: int) -> Verdict:
    """Count one request for `key` in `bucket`; refuse once `limit` per `window` s is passed."""
    now = time.time()
    slot = int(now // window)
    cache_key = f"taproot:throttle:{bucket}:{key}:{slot}"
    cache.add(cache_key, 0, timeout=window + 60)
    try:
        count = cache.incr(cache_key)
    except ValueError:  # the entry expired between add() and incr()
        cache.set(cache_key, 1, timeout=window + 60)
        count = 1
    retry_after = max(1, int((slot + 1) * window - now))
    return Verdict(allowed=count <= limit, retry_after=retry_after)
