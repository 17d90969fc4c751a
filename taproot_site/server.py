"""`python -m taproot_site.server`: uvicorn's own command line, with two fixes.

With `--workers` above 1, uvicorn binds the listening socket itself and leaves its
protocol number at 0. Accepted connections inherit it, and asyncio sets TCP_NODELAY only
on sockets that say they are TCP, so every response on a kept-alive connection waits for
the client's delayed ACK: about 40 ms a call on Linux (uvicorn issue #3149, measured in
docs/benchmarks.md). Here the socket says what it is.

uvicorn believes X-Forwarded-For and X-Forwarded-Proto from 127.0.0.1 and ::1 unless told
otherwise, so anyone reaching it through a tunnel or proxy on the same machine that
passes the header on could choose the address the registration limit counts. Here they
are believed only from the proxies named in FORWARDED_ALLOW_IPS (or, when that is unset,
TAPROOT_TRUSTED_PROXIES), and from no one when neither is set; options given on the
command line still win. Everything else is uvicorn's.
"""

import os
import socket
import sys
from collections.abc import Mapping, Sequence

import uvicorn.config
import uvicorn.main

from taproot_site.env import settings_or_exit

_uvicorn_bind_socket = uvicorn.config.Config.bind_socket


# Named `self` like the method it replaces, which can be called with `self=`.
def bind_tcp_socket(self: uvicorn.config.Config) -> socket.socket:
    """uvicorn's listening socket, marked as TCP so accepted connections get TCP_NODELAY."""
    sock = _uvicorn_bind_socket(self)
    if sock.family in (socket.AF_INET, socket.AF_INET6) and sock.proto == 0:
        # The same descriptor, with the protocol stated instead of detected.
        return socket.socket(sock.family, sock.type, socket.IPPROTO_TCP, fileno=sock.detach())
    return sock


def proxy_arguments(environ: Mapping[str, str]) -> list[str]:
    """uvicorn's options for whom to believe about the client's address and scheme."""
    trusted = (
        environ.get("FORWARDED_ALLOW_IPS", "").strip()
        or environ.get("TAPROOT_TRUSTED_PROXIES", "").strip()
    )
    if not trusted:
        return ["--no-proxy-headers"]
    return ["--proxy-headers", "--forwarded-allow-ips", trusted]


def main(args: Sequence[str] | None = None) -> None:
    """uvicorn's command line with `args` (the process's own by default)."""
    # Refused settings stop the server here, in one line, not in each worker's traceback.
    settings_or_exit()
    uvicorn.config.Config.bind_socket = bind_tcp_socket  # type: ignore[method-assign]
    given = sys.argv[1:] if args is None else list(args)
    # Later options win in uvicorn's command line, so the defaults go first.
    uvicorn.main.main(args=[*proxy_arguments(os.environ), *given])


if __name__ == "__main__":
    main()
