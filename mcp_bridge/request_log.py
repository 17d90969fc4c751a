"""One log line per /mcp request (logger "taproot.mcp"): HTTP method, MCP method, tool name,
user id, HTTP status, outcome and duration. Never arguments, memory text or tokens.

The ASGI wrapper opens a record for the request; the MCP middleware, which sees the
decoded message, fills in the MCP method, tool and outcome. The SDK runs handlers in a
copy of the request's context, so both see the same record object.
"""

import contextvars
import logging
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.types import CallToolResult

logger = logging.getLogger("taproot.mcp")


@dataclass
class RequestRecord:
    http_method: str
    started: float = field(default_factory=time.perf_counter)
    status: int | None = None
    mcp_method: str | None = None
    tool: str | None = None
    user_id: str | None = None
    outcome: str | None = None

    def line(self) -> str:
        duration_ms = (time.perf_counter() - self.started) * 1000
        parts = [
            self.http_method,
            self.mcp_method or "-",
            f"tool={self.tool}" if self.tool else None,
            f"user={self.user_id or '-'}",
            f"status={self.status if self.status is not None else '-'}",
            f"outcome={self.outcome}" if self.outcome else None,
            f"{duration_ms:.1f}ms",
        ]
        return " ".join(p for p in parts if p)


current_record: contextvars.ContextVar[RequestRecord | None] = contextvars.ContextVar(
    "taproot_mcp_request", default=None
)


# Method names are client-sent text: log them only when they look like one.
_METHOD_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_/.-]{0,63}")


class RequestLogMiddleware:
    """MCP middleware: notes which method (and tool) the request carried and how it ended."""

    def __init__(self, tool_names: Iterable[str]) -> None:
        self.tool_names = frozenset(tool_names)

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        record = current_record.get()
        if record is None:
            return await call_next(ctx)
        record.mcp_method = ctx.method if _METHOD_NAME.fullmatch(ctx.method) else "(unrecognised)"
        if ctx.method == "tools/call":
            name = ctx.params.get("name") if ctx.params else None
            record.tool = name if name in self.tool_names else "(unknown)"
        try:
            result = await call_next(ctx)
        except BaseException:
            record.outcome = "protocol_error"
            raise
        record.outcome = "tool_error" if is_tool_error(result) else "ok"
        return result


def is_tool_error(result: HandlerResult) -> bool:
    # Handlers may hand back the model or its wire form.
    if isinstance(result, CallToolResult):
        return bool(result.is_error)
    return isinstance(result, dict) and result.get("isError") is True
