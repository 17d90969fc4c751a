"""A synchronous face on the real MCP client library, for tests.

The async `mcp.client.Client` runs in an AnyIO blocking portal (an event loop in a
thread), so tests stay plain sync functions that also use the Django ORM directly.
"""

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx2
from anyio.from_thread import BlockingPortal
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult, ListToolsResult

MODERN_VERSION = "2026-07-28"


@asynccontextmanager
async def mcp_client(
    url: str, token: str | None, *, mode: str, timeout: float = 30, **http_options: Any
) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    # The transport does not close a client it is handed: close it here.
    http = httpx2.AsyncClient(headers=headers, timeout=timeout, **http_options)
    try:
        async with Client(streamable_http_client(url, http_client=http), mode=mode) as client:
            yield client
    finally:
        await http.aclose()


@dataclass
class McpCaller:
    portal: BlockingPortal
    client: Client
    mode: str = "legacy"

    @property
    def protocol_version(self) -> str:
        return self.client.protocol_version

    def list_tools(self) -> ListToolsResult:
        return self.portal.call(self.client.list_tools)

    def call(self, name: str, arguments: dict[str, Any] | None = None) -> CallToolResult:
        return self.portal.call(self.client.call_tool, name, arguments or {})

    def reply(self, name: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        """The JSON of a call that must succeed."""
        result = self.call(name, arguments)
        body = decode(result)
        assert not result.is_error, (self.mode, body)
        assert body["status"] == "ok", (self.mode, body)
        return body

    def refusal(self, name: str, arguments: dict[str, Any] | None = None) -> str:
        """The message of a call that must be refused with the project's error shape."""
        result = self.call(name, arguments)
        body = decode(result)
        assert result.is_error, (self.mode, body)
        assert body == {"status": "error", "message": body["message"]}, self.mode
        assert body["message"], self.mode
        return body["message"]


def decode(result: CallToolResult) -> dict[str, Any]:
    """The single JSON text item every Taproot tool answers with."""
    assert len(result.content) == 1, result.content
    item = result.content[0]
    assert item.type == "text"
    return json.loads(item.text)
