"""ASGI entry point: `uvicorn taproot_site.asgi:application --lifespan on`.

A small dispatcher sits on top of Django. It answers the lifespan protocol itself
(Django refuses it) and runs the MCP session manager for the life of the process; it
sends `/mcp` to the MCP SDK's Streamable HTTP app and everything else to Django.
"""

import json
import os
from collections.abc import Awaitable, Callable, Iterable, Mapping, MutableMapping
from contextlib import AsyncExitStack
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.asgi import get_asgi_application
from django.db import DatabaseError, connections
from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE

from mcp_bridge.request_log import RequestRecord, current_record, logger
from memories.busy import BUSY_MESSAGE, RETRY_AFTER_SECONDS, is_pool_timeout
from taproot_site.admission import (
    BodyTooLarge,
    ClientGone,
    TokenSlots,
    declared_length,
    read_body,
    replaying,
)

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


# What nginx logs for a client that left before the answer: no response was sent.
CLIENT_CLOSED_REQUEST = 499
# The SDK's own answer to a body over its limit.
BODY_TOO_LARGE = b"Request body too large"
CLOSE = (b"connection", b"close")
RETRY_AFTER = (b"retry-after", str(RETRY_AFTER_SECONDS).encode())


def _jsonrpc_error(message: str) -> bytes:
    return json.dumps(
        {"jsonrpc": "2.0", "id": None, "error": {"code": -32000, "message": message}},
        separators=(",", ":"),
    ).encode()


TOO_MANY_REQUESTS = _jsonrpc_error(
    "Too many requests at once with this token: wait for one to finish, then try again."
)
DATABASE_BUSY = _jsonrpc_error(BUSY_MESSAGE)


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
        from mcp_bridge import auth, database
        from mcp_bridge.server import MCP_PATH, build_endpoint

        self.auth = auth
        self.database = database

        self.mcp_path = MCP_PATH
        self.mcp = build_endpoint()
        self.body_timeout = settings.TAPROOT_MCP_BODY_TIMEOUT
        self.token_slots = TokenSlots(settings.TAPROOT_MCP_REQUESTS_PER_TOKEN)
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
        self.database.shutdown()

    async def serve_mcp(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve one /mcp request without letting a slow or greedy client hold the database.

        In order: a slot among the requests its token may have in progress at once; the
        whole body, within TAPROOT_MCP_BODY_TIMEOUT; only then anything that needs the
        database (see serve_with_database). Each refusal is an answer of its own: 429,
        408, 413, or none to a client that left (logged as 499).
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
            authorization = _header(scope, b"authorization")
            if scope.get("method") == "GET" and authorization is not None:
                # The SDK would open an event stream that, without sessions, never carries
                # a message and holds the request's thread and database connection for as
                # long as the client keeps it open. The transport allows 405 instead, and
                # clients then work with POST alone. Without a token the SDK answers: its
                # 401 challenge is how a client finds the sign-in.
                await _send_json(send_noting_status, 405, NO_EVENT_STREAM, [(b"allow", b"POST")])
                return
            with self.token_slots.hold(authorization) as admitted:
                if not admitted:
                    record.outcome = "too_many_requests"
                    await _send_json(
                        send_noting_status, 429, TOO_MANY_REQUESTS, [RETRY_AFTER, CLOSE]
                    )
                    return
                body = await self.whole_body(scope, receive, send_noting_status, record)
                if body is not None:
                    await self.serve_with_database(
                        scope, replaying(body, receive), send_noting_status, record
                    )
        finally:
            user = scope.get("user")
            access_token = getattr(user, "access_token", None)
            record.user_id = getattr(access_token, "subject", None)
            current_record.reset(token)
            logger.info("%s", record.line())

    async def whole_body(
        self, scope: Scope, receive: Receive, send: Send, record: RequestRecord
    ) -> bytes | None:
        """The request body, or None once the request is answered (or its client gone)."""
        size = declared_length(scope)
        try:
            if size is not None and size > DEFAULT_MAX_REQUEST_BODY_SIZE:
                raise BodyTooLarge
            return await read_body(
                receive, timeout=self.body_timeout, limit=DEFAULT_MAX_REQUEST_BODY_SIZE
            )
        except ClientGone:
            # Nothing to answer and nothing went wrong on this side.
            record.status = CLIENT_CLOSED_REQUEST
            record.outcome = "client_gone"
        except TimeoutError:
            record.outcome = "body_timeout"
            message = (
                f"The request body did not arrive within {self.body_timeout} seconds: "
                "send the whole request at once and try again."
            )
            await _send_json(send, 408, _jsonrpc_error(message), [CLOSE])
        except BodyTooLarge:
            await _send(send, 413, BODY_TOO_LARGE, b"text/plain; charset=utf-8", [CLOSE])
        return None

    async def serve_with_database(
        self, scope: Scope, receive: Receive, send: Send, record: RequestRecord
    ) -> None:
        """The part of a request that may use the database, once its body is in.

        The bearer token is looked up first: one query, on a database thread (see
        mcp_bridge.database), and a pool with no free connection is answered 503 here.
        The SDK's app then runs knowing the outcome: its bearer middleware asks our
        verifier, which answers from that lookup, and a request without a valid token
        gets the SDK's own 401 challenge (SPEC §9). A tool call makes the request's
        second and last trip to a database thread; nothing else in the request does.
        """
        raw_token = self.auth.bearer_token(scope.get("headers", []))
        if raw_token is None:
            await self.mcp.app(scope, receive, send)
            return
        try:
            access = await self.auth.check_token(raw_token)
        except DatabaseError as error:
            if not is_pool_timeout(error):
                raise
            record.outcome = "database_busy"
            await _send_json(send, 503, DATABASE_BUSY, [RETRY_AFTER])
            return
        with self.auth.checked_token(raw_token, access):
            await self.mcp.app(scope, receive, send)


def _header(scope: Scope, name: bytes) -> bytes | None:
    return next((value for key, value in scope.get("headers", []) if key.lower() == name), None)


async def _send(
    send: Send,
    status: int,
    body: bytes,
    content_type: bytes,
    extra_headers: Iterable[tuple[bytes, bytes]] = (),
) -> None:
    headers = [
        (b"content-type", content_type),
        (b"content-length", str(len(body)).encode()),
        *extra_headers,
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _send_json(
    send: Send, status: int, body: bytes, extra_headers: Iterable[tuple[bytes, bytes]] = ()
) -> None:
    await _send(send, status, body, b"application/json", extra_headers)


def build_application() -> TaprootASGI:
    """A fresh application (tests build one per server)."""
    return TaprootASGI()


application = build_application()
