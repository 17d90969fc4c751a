"""A /mcp request answered in its own task: the SDK's stateless, JSON-response serving
without the machinery it builds around each request.

For every POST, the SDK's stateless Streamable HTTP manager makes a transport, starts a
server task for it in its task group, opens four memory streams between the two and a
task that routes answers, runs a JSON-RPC dispatcher that spawns one more task for the
request, then tears it all down once the answer is written: 0.3-0.4 ms of the 4.5 ms a
recall by ids took in the worker (docs/benchmarks.md, "The fixed cost of a call").
Stateless and answering in JSON, none of it carries anything: one request comes in, one
answer goes out, and the request cannot be reached by a notification or a
server-initiated request.

So `Exchange` answers an ordinary request itself: a POST that passes the transport's own
checks (Host and Origin, Accept, Content-Type) whose body is one JSON-RPC request other
than `initialize`. It hands the request to the SDK's single-exchange driver
(`mcp.server.runner.serve_one`, the kernel of the SDK's own per-request entry), with the
connection and the dispatch context the stateless manager gives it, maps a failure to
the JSON-RPC error the dispatcher writes, and writes the answer as the transport writes
it. The SDK's server, with its middleware, the tools' argument validation and the
shaping of each result, serves it exactly as before. Anything else (GET, DELETE, a
notification, a body that is not one JSON-RPC request, refused headers, `initialize`)
goes to the SDK's own path, with the body handed over again.

tests/mcp/test_exchange.py holds the two paths to the same answers, byte for byte.
"""

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
import pydantic_core
from mcp.server.connection import Connection
from mcp.server.runner import serve_one
from mcp.server.streamable_http import CONTENT_TYPE_JSON, check_accept_headers
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecurityMiddleware
from mcp.shared.dispatcher import CallOptions
from mcp.shared.exceptions import NoBackChannelError
from mcp.shared.jsonrpc_dispatcher import handler_exception_to_error_data
from mcp.shared.message import MessageMetadata, ServerMessageMetadata
from mcp.shared.transport_context import TransportContext
from mcp_types import (
    DEFAULT_NEGOTIATED_VERSION,
    ErrorData,
    JSONRPCError,
    JSONRPCRequest,
    JSONRPCResponse,
    RequestId,
    jsonrpc_message_adapter,
)
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

# The dispatcher's own logger: an unexpected failure is logged where it always was.
dispatcher_logger = logging.getLogger("mcp.shared.jsonrpc_dispatcher")
logger = logging.getLogger("taproot.mcp")

StatelessHandler = Callable[[str | None, Scope, Receive, Send], Awaitable[None]]

# What the stateless manager stamps on every message of a request (TransportContext).
TRANSPORT = TransportContext(kind="streamable-http", can_send_request=False)


@dataclass
class ExchangeContext:
    """The dispatch context of one request answered in JSON (the SDK's `DispatchContext`).

    As the stateless manager's: nothing reaches the client but the answer, so a
    notification (progress included) is dropped, as its message router drops one in
    JSON-response mode, and a server-initiated request is refused."""

    request_id: RequestId
    message_metadata: MessageMetadata
    transport: TransportContext = TRANSPORT
    cancel_requested: anyio.Event = field(default_factory=anyio.Event)

    @property
    def can_send_request(self) -> bool:
        return False

    async def send_raw_request(
        self,
        method: str,
        params: Mapping[str, Any] | None,
        opts: CallOptions | None = None,
    ) -> dict[str, Any]:
        raise NoBackChannelError(method)

    async def notify(
        self, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None
    ) -> None:
        logger.debug("dropped %s: the answer is one JSON body", method)

    async def progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        return None


def replay(body: bytes, receive: Receive) -> Receive:
    """A receive channel that hands over `body` whole, then waits on the real one."""
    pending: list[Message] = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive_again() -> Message:
        if pending:
            return pending.pop()
        return await receive()

    return receive_again


class Exchange:
    """The stateless manager's per-request handler, answering ordinary requests itself
    (this module's docstring) and handing the rest to the SDK's (`sdk`)."""

    def __init__(self, manager: StreamableHTTPSessionManager, sdk: StatelessHandler) -> None:
        self.manager = manager
        self.sdk = sdk
        self.security = TransportSecurityMiddleware(manager.security_settings)

    @classmethod
    def install(cls, manager: StreamableHTTPSessionManager) -> "Exchange":
        """Put an Exchange in front of the manager's own stateless handler."""
        if not (manager.stateless and manager.json_response):
            raise ValueError("an Exchange serves a stateless manager answering in JSON")
        exchange = cls(manager, manager._handle_stateless_request)
        # The manager looks the handler up on itself for every request.
        setattr(manager, "_handle_stateless_request", exchange)  # noqa: B010
        return exchange

    async def __call__(
        self, protocol_version: str | None, scope: Scope, receive: Receive, send: Send
    ) -> None:
        request = Request(scope, receive)
        if not await self._ordinary_headers(request):
            await self.sdk(protocol_version, scope, receive, send)
            return
        body = await request.body()
        message = _one_request(body)
        if message is None:
            await self.sdk(protocol_version, scope, replay(body, receive), send)
            return
        answer = await self.answer(message, request, protocol_version)
        response = Response(
            answer.model_dump_json(by_alias=True, exclude_unset=True),
            status_code=200,
            headers={"Content-Type": CONTENT_TYPE_JSON},
        )
        await response(scope, receive, send)

    async def _ordinary_headers(self, request: Request) -> bool:
        """Whether the transport would take this request's headers (the checks it makes
        before reading the body, in its order) and it is a POST."""
        if request.method != "POST":
            return False
        if await self.security.validate_request(request, is_post=True) is not None:
            return False
        has_json, _ = check_accept_headers(request)
        if not has_json:
            return False
        content_type = request.headers.get("content-type", "")
        parts = [part.strip() for part in content_type.split(";")[0].split(",")]
        return CONTENT_TYPE_JSON in parts

    async def answer(
        self, message: JSONRPCRequest, request: Request, protocol_version: str | None
    ) -> JSONRPCResponse | JSONRPCError:
        """The request served by the SDK's server, and its answer as the dispatcher
        writes it (a handler's failure mapped to a JSON-RPC error as it maps one)."""
        context = ExchangeContext(
            request_id=message.id,
            message_metadata=ServerMessageMetadata(request_context=request, can_send_request=False),
        )
        # The stateless manager's connection: born ready, at the version the header names.
        connection = Connection.from_envelope(
            protocol_version if protocol_version is not None else DEFAULT_NEGOTIATED_VERSION,
            None,
            None,
        )
        try:
            result = await serve_one(
                self.manager.app,
                context,
                message.method,
                message.params,
                connection=connection,
                lifespan_state=self.manager._lifespan_state,
            )
        except Exception as error:
            data = handler_exception_to_error_data(error)
            if data is None:
                dispatcher_logger.exception("handler for %r raised", message.method)
                data = ErrorData(code=0, message=str(error))
            return JSONRPCError(jsonrpc="2.0", id=message.id, error=data)
        return JSONRPCResponse(jsonrpc="2.0", id=message.id, result=result)


def _one_request(body: bytes) -> JSONRPCRequest | None:
    """The body as one JSON-RPC request other than `initialize`; None for anything the
    SDK's path answers otherwise (a parse or validation error, a notification, a
    response, `initialize`)."""
    try:
        message = jsonrpc_message_adapter.validate_python(
            pydantic_core.from_json(body), by_name=False
        )
    except ValueError:  # pydantic's ValidationError is one
        return None
    if not isinstance(message, JSONRPCRequest) or message.method == "initialize":
        return None
    return message
