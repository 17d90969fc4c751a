"""Test-only ASGI wrappers around the real application, for uvicorn in a child process
(`run_server(app="tests.mcp.wrapped_apps:…")`)."""

import contextvars
import os
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

from django.db.backends.utils import CursorWrapper

from mcp_bridge.admission import Receive, Scope, Send
from taproot_site.asgi import application

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


# --- Counting the statements each request sends to the database ------------------------

QUERIES_HEADER = b"x-taproot-queries"
STATEMENTS_HEADER = b"x-taproot-statements"
_statements: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar(
    "taproot_test_statements", default=None
)


def _note_statements() -> None:
    """Note every statement Django sends for the current request, on whichever thread
    runs it (the request's context variables travel with its calls). Only in the
    server that serves `query_counted`: the first request sets it up."""
    if getattr(CursorWrapper, "taproot_noted", False):
        return
    CursorWrapper.taproot_noted = True  # type: ignore[attr-defined]

    def noting(execute: Any) -> Any:
        def noted(self: Any, sql: str, params: Any, *more: Any) -> Any:
            found = _statements.get()
            if found is not None:
                found.append(" ".join(sql.split()))
            return execute(self, sql, params, *more)

        return noted

    CursorWrapper._execute = noting(CursorWrapper._execute)
    CursorWrapper._executemany = noting(CursorWrapper._executemany)


async def query_counted(scope: Scope, receive: Receive, send: Send) -> None:
    """The application, with the number of statements each request sent to the database
    on its response (SQLite's BEGIN, which PostgreSQL sends without a statement, left
    out), and the statements themselves, shortened."""
    if scope["type"] != "http":
        await application(scope, receive, send)
        return
    _note_statements()
    statements: list[str] = []
    token = _statements.set(statements)

    async def counted(message: MutableMapping[str, Any]) -> None:
        if message["type"] == "http.response.start":
            sent = [s for s in statements if not s.startswith("BEGIN")]
            listed = " | ".join(s[:70].rstrip() for s in sent).encode("ascii", "replace")
            extra = [(QUERIES_HEADER, str(len(sent)).encode()), (STATEMENTS_HEADER, listed)]
            message = {**message, "headers": [*message.get("headers", []), *extra]}
        await send(message)

    try:
        await application(scope, receive, counted)
    finally:
        _statements.reset(token)
