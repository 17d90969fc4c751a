"""The launcher `scripts/serve` runs: uvicorn, with TCP_NODELAY kept for several workers."""

import asyncio
import socket

import uvicorn

from taproot_site.server import bind_tcp_socket


def several_workers_config() -> uvicorn.Config:
    return uvicorn.Config("taproot_site.asgi:application", host="127.0.0.1", port=0, workers=2)


async def nodelay_of_an_accepted_connection(listener: socket.socket) -> int:
    """Serve on the listening socket as a uvicorn worker does; TCP_NODELAY of what it accepts."""
    loop = asyncio.get_running_loop()
    accepted: asyncio.Future[int] = loop.create_future()

    class Probe(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            sock = transport.get_extra_info("socket")
            accepted.set_result(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            transport.close()

    server = await loop.create_server(Probe, sock=listener)
    try:
        _, writer = await asyncio.open_connection(*listener.getsockname()[:2])
        try:
            return await asyncio.wait_for(accepted, timeout=10)
        finally:
            writer.close()
    finally:
        server.close()
        await server.wait_closed()


def test_the_listening_socket_says_it_is_tcp():
    with bind_tcp_socket(several_workers_config()) as listener:
        assert listener.family == socket.AF_INET
        assert listener.type == socket.SOCK_STREAM
        assert listener.proto == socket.IPPROTO_TCP
        assert listener.getsockname()[0] == "127.0.0.1"


def test_connections_accepted_on_it_are_sent_without_delay():
    with bind_tcp_socket(several_workers_config()) as listener:
        assert asyncio.run(nodelay_of_an_accepted_connection(listener)) != 0
