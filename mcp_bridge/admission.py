"""What a /mcp request gets through before it may touch the database.

uvicorn hands the application a request as soon as its headers are in and has no limit
on how long the body may take. A request that borrowed a database connection first (the
bearer-token lookup does) and then waited for a body sent a few bytes at a time would
hold that connection all along, and a handful of such requests would leave every other
user waiting for one. So each /mcp request first takes a slot among the requests its
token may have in progress at once, then arrives whole within a deadline, and only then
reaches anything that uses the database.

`McpAdmission` is that gate: the ASGI app the site's dispatcher (taproot_site.asgi) mounts
at /mcp. It answers each refusal itself (429, 408, 413, 503, or nothing to a client that
left, logged as 499), writes the request's log line (mcp_bridge.request_log), and hands
what it admits to the MCP SDK's Streamable HTTP app.
"""

import hashlib
import json
from collections import Counter
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Iterable,
    Iterator,
    Mapping,
    MutableMapping,
)
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import anyio
from django.conf import settings
from django.db import DatabaseError
from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE

from mcp_bridge import database
from mcp_bridge.database import BUSY_MESSAGE, RETRY_AFTER_SECONDS, is_pool_timeout
from mcp_bridge.request_log import RequestRecord, current_record, logger

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


class ClientGone(Exception):
    """The client disconnected before its request body was complete."""


class BodyTooLarge(Exception):
    """The request body is larger than the endpoint accepts."""


def declared_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", []):
        if name.lower() == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


async def read_body(receive: Receive, *, timeout: float, limit: int) -> bytes:
    """The whole request body, or TimeoutError when it takes longer than `timeout` seconds.

    Raises ClientGone when the client disconnects first and BodyTooLarge past `limit`
    bytes (nothing more is read then).
    """
    body = bytearray()
    with anyio.fail_after(timeout):
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise ClientGone
            body += message.get("body", b"")
            if len(body) > limit:
                raise BodyTooLarge
            if not message.get("more_body", False):
                return bytes(body)


def replaying(body: bytes, receive: Receive) -> Receive:
    """A receive channel that hands over `body` whole, then waits on the real one
    (which reports the client's disconnect)."""
    pending = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive_again() -> MutableMapping[str, Any]:
        if pending:
            return pending.pop()
        return await receive()

    return receive_again


class TokenSlots:
    """How many /mcp requests each bearer token has in progress in this process.

    Keyed by a digest of the Authorization header, so the table holds no token, and a
    token's entry lasts only while it has requests in progress. One event loop serves
    them all: no lock is needed.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.in_progress: Counter[str] = Counter()

    @contextmanager
    def hold(self, authorization: bytes | None) -> Iterator[bool]:
        """Takes a slot for the token for the duration of the block; yields False (and
        takes none) when the token already has `limit` requests in progress.

        A request without a token needs no slot: it is answered with the 401 challenge,
        without touching the database.
        """
        if authorization is None:
            yield True
            return
        key = hashlib.sha256(authorization).hexdigest()
        if self.in_progress[key] >= self.limit:
            yield False
            return
        self.in_progress[key] += 1
        try:
            yield True
        finally:
            self.in_progress[key] -= 1
            if not self.in_progress[key]:
                del self.in_progress[key]


class McpAdmission:
    """/mcp as an ASGI app: the MCP SDK's Streamable HTTP app behind the gate above.

    Built once Django is set up (the endpoint's tools use models and settings); it answers
    only while `serving()` runs, which the dispatcher enters for the life of the process.
    """

    def __init__(self) -> None:
        # Imported here, once Django is set up: they use models.
        from mcp_bridge import auth
        from mcp_bridge.server import MCP_PATH, build_endpoint

        self.auth = auth
        self.path = MCP_PATH
        self.mcp = build_endpoint()
        self.body_timeout = settings.TAPROOT_MCP_BODY_TIMEOUT
        self.token_slots = TokenSlots(settings.TAPROOT_MCP_REQUESTS_PER_TOKEN)
        self.running = False

    @asynccontextmanager
    async def serving(self) -> AsyncIterator[None]:
        """The MCP session manager, running; once it has stopped, the database threads."""
        async with self.mcp.session_manager.run():
            self.running = True
            try:
                yield
            finally:
                self.running = False
        database.shutdown()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
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
