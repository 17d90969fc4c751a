"""`python -m taproot_site.launch`: the run command's last step (scripts/serve runs it once
the database is ready). uvicorn serves Taproot on HOST:PORT with WORKERS workers; extra
arguments go to uvicorn.

OAuth clients are told where /mcp is by TAPROOT_PUBLIC_URL. Unset, that is where the
server listens (settings derive it from the same HOST and PORT). Set to anything else,
one line at start says so: a client sent there must reach this server through a proxy or
tunnel, or connecting fails with `invalid_target` or a 401.
"""

import ipaddress
import sys
from collections.abc import Sequence
from urllib.parse import urlsplit

from taproot_site import server
from taproot_site.env import (
    DEFAULT_HOST,
    DEFAULT_PORT,
    env_int,
    env_str,
    local_url,
    settings_or_exit,
)


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def listens_at(public_url: str, host: str, port: int) -> bool:
    """True when `public_url` is this machine's own address for a server on host:port."""
    public = urlsplit(public_url)
    local = urlsplit(local_url(host, port))
    if public.scheme != "http" or (public.port or 80) != port:
        return False
    public_host, local_host = public.hostname or "", local.hostname or ""
    return public_host == local_host or (_is_loopback(public_host) and _is_loopback(local_host))


def public_url_note(public_url: str, host: str, port: int) -> str | None:
    """The start-up line for a TAPROOT_PUBLIC_URL that is not where the server listens."""
    if not public_url or listens_at(public_url, host, port):
        return None
    local = local_url(host, port)
    return (
        f"Taproot listens on {local} and tells OAuth clients to use {public_url}/mcp "
        "(TAPROOT_PUBLIC_URL): that address must lead here, through a proxy or tunnel, "
        f"or connecting fails; unset TAPROOT_PUBLIC_URL if it should be {local}."
    )


def main(args: Sequence[str] = ()) -> None:
    settings_or_exit()
    host = env_str("HOST", DEFAULT_HOST)
    port = env_int("PORT", DEFAULT_PORT, minimum=1)
    public_url = env_str("TAPROOT_PUBLIC_URL").rstrip("/")
    print(
        f"Taproot is starting on {local_url(host, port)}/ (dashboard: /dashboard/, admin: /admin/)",
        file=sys.stderr,
    )
    note = public_url_note(public_url, host, port)
    if note:
        print(note, file=sys.stderr)
    sys.stderr.flush()
    server.main(
        [
            "taproot_site.asgi:application",
            *("--host", host, "--port", str(port), "--lifespan", "on"),
            *("--workers", env_str("WORKERS", "1") or "1"),
            *args,
        ]
    )


if __name__ == "__main__":
    main(sys.argv[1:])
