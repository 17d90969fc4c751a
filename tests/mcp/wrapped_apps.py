"""Test-only ASGI wrappers around the real application, for uvicorn in a child process
(`run_server(app="tests.mcp.wrapped_apps:…")`)."""

import os
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

from taproot_site.asgi import Receive, Scope, Send, application

WORKER_HEADER = b"x-taproot-worker"
# Names a file holding the token: it can only be made once the server's URL (its
# resource) is known, after the server has started.
TOKEN_FILE_VARIABLE = "TAPROOT_TEST_BEARER_TOKEN_FILE"


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
    """The application, with `Authorization: Bearer <token>` (read from the file that
    $TAPROOT_TEST_BEARER_TOKEN_FILE names) added to requests that carry none: for the MCP
    conformance suite, which cannot send a token. The real verifier still checks it."""
    token_file = Path(os.environ[TOKEN_FILE_VARIABLE])
    if scope["type"] == "http" and scope["path"] == "/mcp" and token_file.exists():
        headers = list(scope.get("headers", []))
        if not any(name.lower() == b"authorization" for name, _ in headers):
            headers.append((b"authorization", b"Bearer " + token_file.read_bytes().strip()))
            scope = {**scope, "headers": headers}
    await application(scope, receive, send)
