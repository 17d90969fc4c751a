"""Running a memories service for the token's user and turning its answer into a tool result.

Every tool result is one text item of compact JSON. A refusal (InvalidInput) becomes
`isError` with `{"status": "error", "message": …}`; anything unexpected is logged here
and answered with a generic message, never a traceback or a protocol error.
"""

import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from django.db import DatabaseError
from mcp.server.mcpserver import Context
from mcp.types import CallToolResult, TextContent

from mcp_bridge.auth import NotAuthenticated, token_user
from mcp_bridge.capacity import step_aside
from mcp_bridge.database import busy_message, run_sync
from mcp_bridge.messages import say
from memories.errors import DomainError, InvalidInput
from memories.jsonutil import dumps
from memories.quoting import shown

logger = logging.getLogger("taproot.mcp")

Reply = Mapping[str, Any] | str
Service = Callable[..., Reply]

UNEXPECTED = (
    "The server hit an unexpected problem running {tool}; the details are in its log. "
    "Nothing you sent was at fault. Try again once; if it fails again, tell the user "
    "that Taproot is not working right now."
)
# A warning names this many unknown arguments at most: a client may send thousands.
MAX_NAMED = 10
NOT_SIGNED_IN = "This request is not signed in to a Taproot account. Reconnect the connector."


def text_result(text: str, *, is_error: bool = False) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=is_error)


def error_result(message: str) -> CallToolResult:
    return text_result(dumps({"status": "error", "message": message}), is_error=True)


def sent_argument_names(ctx: Context) -> list[str]:
    """The argument names exactly as the client sent them (the SDK drops unknown ones)."""
    try:
        params = ctx.request_context.params
    except ValueError:
        return []
    arguments = params.get("arguments") if params else None
    return [str(name) for name in arguments] if isinstance(arguments, Mapping) else []


def _with_unknown_warning(reply: Mapping[str, Any], unknown: Iterable[str]) -> Mapping[str, Any]:
    unknown = sorted(unknown)
    if not unknown:
        return reply
    named = ", ".join(shown(name) for name in unknown[:MAX_NAMED])
    if len(unknown) > MAX_NAMED:
        named += f" and {len(unknown) - MAX_NAMED:,} more"
    warning = f"Ignored unknown argument(s): {named}."
    return {**reply, "warnings": [*reply.get("warnings", []), warning]}


async def run_tool(
    ctx: Context,
    tool: str,
    service: Service,
    /,
    *,
    ahead: Callable[[], Awaitable[Mapping[str, Any]]] | None = None,
    **arguments: object,
) -> CallToolResult:
    """Call `service(owner=<token user>, **arguments)` and reply with its JSON.

    `ahead` embeds what the call will need off the database threads (mcp_bridge.embedding)
    and gives the service the arguments to find it by. Before each step, a request of a
    flooding user (others of theirs waiting, or several at once a moment ago) lets other
    users' running requests finish first (mcp_bridge.capacity.step_aside). A reply that
    is already text (the reflect payload) is sent exactly as it is.
    """
    sent = arguments

    def call() -> Reply:
        return service(owner=token_user(), **arguments)

    try:
        await step_aside()
        if ahead is not None:
            arguments = {**arguments, **await ahead()}
            await step_aside()
        # The request's one hop to a database thread after the token check.
        reply = await run_sync(call)
    except InvalidInput as refusal:
        return error_result(refusal.message)
    except DomainError as refusal:  # from a handler that words none of its refusals itself
        return error_result(say(refusal))
    except NotAuthenticated:
        return error_result(NOT_SIGNED_IN)
    except DatabaseError as error:
        if busy := busy_message(error):
            return error_result(busy)
        logger.exception("tool %s failed unexpectedly", tool)
        return error_result(UNEXPECTED.format(tool=tool))
    except Exception:
        logger.exception("tool %s failed unexpectedly", tool)
        return error_result(UNEXPECTED.format(tool=tool))
    if isinstance(reply, str):
        return text_result(reply)
    unknown = set(sent_argument_names(ctx)) - set(sent)
    return text_result(dumps(_with_unknown_warning(reply, unknown)))
