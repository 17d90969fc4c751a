"""The floor of a /mcp call: a bare ASGI endpoint under the same uvicorn that checks a
bearer token against one held in memory and answers a small JSON-RPC result, with no
database and no MCP machinery. What a tool call costs above this is Taproot's own."""

import json
import os
from typing import Any

TOKEN = os.environ.get("TAPROOT_FLOOR_TOKEN", "").encode()
REPLY = json.dumps({"jsonrpc": "2.0", "id": 2, "result": {"content": []}}).encode()


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    authorization = dict(scope["headers"]).get(b"authorization", b"")
    allowed = authorization == b"Bearer " + TOKEN or scope["path"] == "/healthz"
    more = True
    while more:  # the body, as a real endpoint reads it
        message = await receive()
        more = message.get("more_body", False)
    status, body = (200, REPLY) if allowed else (401, b"{}")
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json")],
        }
    )
    await send({"type": "http.response.body", "body": body})
