"""ASGI entry point: `uvicorn taproot_site.asgi:application --lifespan on`.

A small dispatcher sits on top of Django. It answers the lifespan protocol itself
(Django refuses it) and runs the MCP session manager for the life of the process; it
sends `/mcp` to the MCP SDK's Streamable HTTP app and everything else to Django.
"""

import os
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from contextlib import AsyncExitStack
from typing import Any

from asgiref.sync import ThreadSensitiveContext, sync_to_async
from django.core import signals
from django.core.asgi import get_asgi_application
from django.db import connections

from mcp_bridge.request_log import RequestRecord, current_record, logger

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "taproot_site.settings")

# What Django's ASGIHandler asks for; the MCP SDK's app accepts the same.
Scope = dict[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[Mapping[str, Any]], Awaitable[None]]

NOT_RUNNING = (
    b'{"error":"The MCP endpoint is not running: start the server with lifespan on '
    b'(uvicorn taproot_site.asgi:application --lifespan on)."}'
)
# The JSON-RPC error shape the SDK gives its own 405 answers.
NO_EVENT_STREAM = (
    b'{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Method Not Allowed: '
    b'this stateless endpoint offers no event stream; send requests with POST."}}'
)


class StartupRefused(Exception):
    """The server must not start; the message says what to do."""


def _recall_index_problem() -> str | None:
    from memories.indexing import index_mismatch

    try:
        return index_mismatch()
    finally:
        connections.close_all()


class TaprootASGI:
    def __init__(self) -> None:
        self.django_app = get_asgi_application()
        # Imported after Django is set up: the MCP bridge uses models and settings.
        from mcp_bridge.server import MCP_PATH, build_endpoint

        self.mcp_path = MCP_PATH
        self.mcp = build_endpoint()
        self.running = False
        self._lifespan_stack = AsyncExitStack()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.lifespan(receive, send)
            return
        if scope["type"] == "http" and scope["path"] == self.mcp_path:
            await self.serve_mcp(scope, receive, send)
            return
        await self.django_app(scope, receive, send)

    async def lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                try:
                    await self.start()
                except StartupRefused as error:
                    await send({"type": "lifespan.startup.failed", "message": str(error)})
                    return
                except Exception as error:
                    await send({"type": "lifespan.startup.failed", "message": repr(error)})
                    return
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self.stop()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def start(self) -> None:
        # Here rather than as a system check: `migrate` runs the checks first, and the
        # command that repairs the index needs the migrated tables.
        problem = await sync_to_async(_recall_index_problem, thread_sensitive=True)()
        if problem:
            raise StartupRefused(problem)
        await self._lifespan_stack.enter_async_context(self.mcp.session_manager.run())
        self.running = True

    async def stop(self) -> None:
        self.running = False
        await self._lifespan_stack.aclose()

    async def serve_mcp(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve one /mcp request the way Django serves its own.

        Like Django's ASGIHandler: a thread-sensitive context, so the request's sync
        database work runs on one thread of its own, and the request_started /
        request_finished signals, so that thread's connections are closed at the end.
        """
        record = RequestRecord(http_method=scope.get("method", "?"))
        token = current_record.set(record)

        async def send_noting_status(message: Mapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                record.status = message["status"]
            await send(message)

        try:
            if not self.running:
                await _send_json(send_noting_status, 503, NOT_RUNNING)
                return
            if scope.get("method") == "GET" and _has_header(scope, b"authorization"):
                # The SDK would open an event stream that, without sessions, never carries
                # a message and holds the request's thread and database connection for as
                # long as the client keeps it open. The transport allows 405 instead, and
                # clients then work with POST alone. Without a token the SDK answers: its
                # 401 challenge is how a client finds the sign-in.
                await _send_json(send_noting_status, 405, NO_EVENT_STREAM, allow=b"POST")
                return
            async with ThreadSensitiveContext():
                await signals.request_started.asend(sender=self.__class__, scope=scope)
                try:
                    await self.mcp.app(scope, receive, send_noting_status)
                finally:
                    await signals.request_finished.asend(sender=self.__class__)
        finally:
            user = scope.get("user")
            access_token = getattr(user, "access_token", None)
            record.user_id = getattr(access_token, "subject", None)
            current_record.reset(token)
            logger.info("%s", record.line())


def _has_header(scope: Scope, name: bytes) -> bool:
    return any(key.lower() == name for key, _ in scope.get("headers", []))


async def _send_json(send: Send, status: int, body: bytes, *, allow: bytes | None = None) -> None:
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
    ]
    if allow is not None:
        headers.append((b"allow", allow))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def build_application() -> TaprootASGI:
    """A fresh application (tests build one per server)."""
    return TaprootASGI()


application = build_application()
