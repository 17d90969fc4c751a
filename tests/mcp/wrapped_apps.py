"""Test-only ASGI wrappers around the real application, for uvicorn in a child process
(`run_server(app="tests.mcp.wrapped_apps:…")`)."""

import os
from collections.abc import MutableMapping
from typing import Any

from taproot_site.asgi import Receive, Scope, Send, application

WORKER_HEADER = b"x-taproot-worker"
TOKEN_VARIABLE = "TAPROOT_TEST_BEARER_TOKEN"


async def worker_tagged(scope: Scope, receive: Receive, send: Send) -> None:
    """The application, with the serving process id on every response."""
    if scope["type"] != "http":
        await application(scope, receive, send)
        return
    pid = str(os.getpid()).encode()

    async def tagged(message: MutableMapping[str, Any]) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", []), (WORKER_HEADER, pid)]}
        await send(message)

    await application(scope, receive, tagged)


async def with_bearer_token(scope: Scope, receive: Receive, send: Send) -> None:
    """The application, with `Authorization: Bearer $TAPROOT_TEST_BEARER_TOKEN` added to
    requests that carry none: for the MCP conformance suite, which cannot send a token.
    The real verifier still checks it."""
    if scope["type"] == "http":
        headers = list(scope.get("headers", []))
        if not any(name.lower() == b"authorization" for name, _ in headers):
            token = os.environ[TOKEN_VARIABLE].encode()
            headers.append((b"authorization", b"Bearer " + token))
            scope = {**scope, "headers": headers}
    await application(scope, receive, send)
