"""What a /mcp request gets through before it may touch the database.

uvicorn hands the application a request as soon as its headers are in and has no limit
on how long the body may take. A request that held a database connection or memory of
the process while it waited for a body sent a few bytes at a time, or never sent, would
leave every other user waiting, and anyone on the internet can open such requests. So
each /mcp request, in order:

1. without a bearer token of the right shape in its Authorization header, is answered
   401 at once, its body unread (the SDK's challenge: how a client finds the sign-in);
   a body declared larger than the SDK accepts is answered 413, unread;
2. has its token looked up from the header, before a byte of the body is read: one
   query, on a database thread, connection given back; an unknown, expired or revoked
   token is answered 401 (the same challenge), unread, holding nothing;
3. arrives whole within a deadline, its bytes counted as they arrive against what the
   process, and what its user, may hold for requests that are not running yet (503
   past either);
4. waits, holding no database connection, for one of the places its user may have in
   progress at once (all of the user's tokens together), up to a bound (then 429);
5. only then reaches the MCP SDK's app and the tool.

`McpAdmission` is that gate: the ASGI app the site's dispatcher (taproot_site.asgi) mounts
at /mcp. It answers each refusal itself (401 by way of the SDK, 405, 408, 413, 429, 503,
or nothing to a client that left, logged as 499), writes the request's log line
(mcp_bridge.request_log), and hands what it admits to the MCP SDK's Streamable HTTP app.
"""

import json
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Iterable,
    Mapping,
    MutableMapping,
)
from contextlib import asynccontextmanager
from typing import Any

import anyio
from django.conf import settings
from django.db import DatabaseError
from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE

from mcp_bridge import database, embedding
from mcp_bridge.capacity import (
    USERS_SHARING_BUFFER,
    BufferBudget,
    BufferClaim,
    BufferFull,
    UserSlots,
    current_place,
)
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


BUFFER_FULL = _jsonrpc_error(
    f"Taproot is receiving too many requests at once. Try again in {RETRY_AFTER_SECONDS} seconds."
)
DATABASE_BUSY = _jsonrpc_error(BUSY_MESSAGE)


def too_many_requests(waited: float) -> bytes:
    return _jsonrpc_error(
        "Too many requests at once for this account: this one waited "
        f"{waited:g} seconds for others to finish. Try again in {RETRY_AFTER_SECONDS} seconds."
    )


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


def has_body(scope: Scope) -> bool:
    """Whether the request says a body follows its headers."""
    size = declared_length(scope)
    return (size is not None and size > 0) or _header(scope, b"transfer-encoding") is not None


async def read_body(
    receive: Receive, *, timeout: float, limit: int, claim: BufferClaim | None = None
) -> bytes:
    """The whole request body, or TimeoutError when it takes longer than `timeout` seconds.

    Raises ClientGone when the client disconnects first, BodyTooLarge past `limit` bytes
    and BufferFull when `claim` cannot grow to hold what arrived (nothing more is read
    then).
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
            if claim is not None:
                claim.grow_to(len(body))
            if not message.get("more_body", False):
                return bytes(body)


def _closing(scope: Scope) -> list[tuple[bytes, bytes]]:
    """Connection: close for an answer sent before a body that is on its way."""
    return [CLOSE] if has_body(scope) else []


def replaying(body: bytes, receive: Receive) -> Receive:
    """A receive channel that hands over `body` whole, then waits on the real one
    (which reports the client's disconnect)."""
    pending = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive_again() -> MutableMapping[str, Any]:
        if pending:
            return pending.pop()
        return await receive()

    return receive_again


class McpAdmission:
    """/mcp as an ASGI app: the MCP SDK's Streamable HTTP app behind the gate above.

    Built once Django is set up (the endpoint's tools use models and settings); it answers
    only while `serving()` runs, which the dispatcher enters for the life of the process.
    """

    def __init__(self) -> None:
        # Imported here, once Django is set up: they use models.
        from mcp_bridge import activity, auth
        from mcp_bridge.server import MCP_PATH, build_endpoint

        self.activity = activity
        self.auth = auth
        self.path = MCP_PATH
        self.mcp = build_endpoint()
        self.body_timeout = settings.TAPROOT_MCP_BODY_TIMEOUT
        buffered = settings.TAPROOT_MCP_BUFFER_MB * 1024 * 1024
        self.buffered = BufferBudget(
            buffered, per_user=max(buffered // USERS_SHARING_BUFFER, DEFAULT_MAX_REQUEST_BODY_SIZE)
        )
        self.user_slots = UserSlots(
            settings.TAPROOT_MCP_REQUESTS_PER_USER, settings.TAPROOT_MCP_QUEUE_TIMEOUT
        )
        self.running = False

    @asynccontextmanager
    async def serving(self) -> AsyncIterator[None]:
        """The MCP session manager and the writing of the clients page's notes, running;
        once they have stopped, the last notes written, then the database and embedding
        threads stopped."""
        async with self.mcp.session_manager.run(), anyio.create_task_group() as tasks:
            tasks.start_soon(self.activity.writing)
            self.running = True
            try:
                yield
            finally:
                self.running = False
                tasks.cancel_scope.cancel()
        await self.activity.write_noted()
        database.shutdown()
        embedding.shutdown()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve one /mcp request without letting a slow, greedy or anonymous client hold
        the database or the process's memory (the steps of this module's docstring)."""
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
            bearer = self.auth.bearer_credentials(authorization)
            if bearer is None:
                await self.challenge(scope, receive, send_noting_status)
                return
            await self.admit(scope, receive, send_noting_status, record, bearer)
        finally:
            if record.user_id is None:
                user = scope.get("user")
                access_token = getattr(user, "access_token", None)
                record.user_id = getattr(access_token, "subject", None)
            current_record.reset(token)
            logger.info("%s", record.line())

    async def challenge(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The SDK's 401 challenge to a request without a bearer token of the right shape:
        before its body is read and without the database. The header is left out, so the
        SDK has nothing to look up; the connection is closed when a body was coming."""
        headers = [(k, v) for k, v in scope.get("headers", []) if k.lower() != b"authorization"]
        closing = has_body(scope)

        async def send_closing(message: Mapping[str, Any]) -> None:
            if closing and message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), CLOSE]}
            await send(message)

        await self.mcp.app({**scope, "headers": headers}, receive, send_closing)

    async def admit(
        self, scope: Scope, receive: Receive, send: Send, record: RequestRecord, bearer: str
    ) -> None:
        """Steps 2 to 5 for a request with a bearer token of the right shape."""
        # The SDK's bearer middleware takes the token to be all that follows the header's
        # first seven characters ("Bearer "): it is given that spelling, so it reads the
        # token our verifier is told about below, whatever spacing the client used.
        headers = [(k, v) for k, v in scope.get("headers", []) if k.lower() != b"authorization"]
        headers.append((b"authorization", b"Bearer " + bearer.encode("ascii")))
        scope = {**scope, "headers": headers}
        size = declared_length(scope)
        if size is not None and size > DEFAULT_MAX_REQUEST_BODY_SIZE:
            await _send(send, 413, BODY_TOO_LARGE, b"text/plain; charset=utf-8", [CLOSE])
            return
        try:
            access = await self.auth.check_token(bearer)
        except DatabaseError as error:
            if not is_pool_timeout(error):
                raise
            record.outcome = "database_busy"
            await _send_json(send, 503, DATABASE_BUSY, [RETRY_AFTER, *_closing(scope)])
            return
        if access is None:
            # The SDK's own 401 challenge (SPEC §9), before a byte of the body is read:
            # a made-up token holds nothing here.
            await self.challenge(scope, receive, send)
            return
        record.user_id = str(access.user.pk)
        claim = self.buffered.claim(record.user_id)
        try:
            body = await self.whole_body(scope, receive, send, record, claim)
            if body is None:
                return
            with self.auth.checked_token(bearer, access):
                await self.serve_in_turn(record.user_id, scope, body, receive, send, record, claim)
        finally:
            claim.release()

    async def whole_body(
        self, scope: Scope, receive: Receive, send: Send, record: RequestRecord, claim: BufferClaim
    ) -> bytes | None:
        """The request body, or None once the request is answered (or its client gone)."""
        try:
            return await read_body(
                receive, timeout=self.body_timeout, limit=DEFAULT_MAX_REQUEST_BODY_SIZE, claim=claim
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
        except BufferFull:
            record.outcome = "buffer_full"
            await _send_json(send, 503, BUFFER_FULL, [RETRY_AFTER, CLOSE])
        return None

    async def serve_in_turn(
        self,
        user: str,
        scope: Scope,
        body: bytes,
        receive: Receive,
        send: Send,
        record: RequestRecord,
        claim: BufferClaim,
    ) -> None:
        """The request, once one of its user's places is free (429 when none came free
        within TAPROOT_MCP_QUEUE_TIMEOUT; nothing when its client left while it waited).

        The token was looked up on a database thread that has given its connection back;
        a tool call makes the request's second and last trip there. Nothing else in the
        request touches the database.
        """
        gone = anyio.Event()

        @asynccontextmanager
        async def watching() -> AsyncIterator[None]:
            """While the request waits: the whole body is in, so the next message can
            only say the client left."""
            async with anyio.create_task_group() as watchers:
                watchers.start_soon(_note_disconnect, receive, gone, self.user_slots)
                yield
                watchers.cancel_scope.cancel()

        async with self.user_slots.hold(user, gone, watching) as admitted:
            # Running (or refused) now: its body no longer waits on this process.
            claim.release()
            if gone.is_set():
                record.status = CLIENT_CLOSED_REQUEST
                record.outcome = "client_gone"
                return
            if not admitted:
                record.outcome = "too_many_requests"
                message = too_many_requests(self.user_slots.wait)
                await _send_json(send, 429, message, [RETRY_AFTER])
                return
            current = current_place.set((self.user_slots, user))
            try:
                await self.mcp.app(scope, replaying(body, receive), send)
            finally:
                current_place.reset(current)


async def _note_disconnect(receive: Receive, gone: anyio.Event, slots: UserSlots) -> None:
    if (await receive())["type"] == "http.disconnect":
        gone.set()
        slots.wake()


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
