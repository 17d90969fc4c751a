"""What a request other than /mcp may send before Django reads it.

Django's ASGI handler reads a request's whole body into a temporary file (on disk past
FILE_UPLOAD_MAX_MEMORY_SIZE) before any view, CSRF check or size setting sees it, and
uvicorn gives a body as long as the client likes to arrive. Taproot faces the internet,
so that would let anyone fill the disk the database and its backups live on, or hold
sockets open for ever. `BodyGate` stands in front of Django:

- a body larger than TAPROOT_MAX_BODY_KB (declared, or counted as a chunked one
  arrives) is refused with 413, unread or cut where it passes the limit;
- a body must arrive within TAPROOT_BODY_TIMEOUT seconds (then 408);
- the one exception is the dashboard's import form: a POST to it from a signed-in,
  active account (its session cookie looked up before a byte of the body is read) may
  send up to TAPROOT_IMPORT_MAX_MB within TAPROOT_IMPORT_BODY_TIMEOUT seconds, one such
  request per account at a time (a second one is answered 429).

A refused body never reaches Django: the gate tells Django the client left (Django then
drops the request without an answer) and answers itself. A request without a body, and
/mcp (mcp_bridge.admission, which has gates of its own), pass untouched.
"""

from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass
from http.cookies import SimpleCookie
from importlib import import_module
from typing import Any

import anyio
from django.conf import settings
from django.contrib.auth import get_user
from django.db import DatabaseError
from django.http import HttpRequest

from mcp_bridge.admission import Receive, Scope, Send, declared_length, has_body
from mcp_bridge.database import is_pool_timeout

CLOSE = (b"connection", b"close")
DISCONNECT: MutableMapping[str, Any] = {"type": "http.disconnect"}


@dataclass(frozen=True)
class Allowance:
    """What one request may send: at most `limit` bytes within `timeout` seconds."""

    limit: int
    timeout: float
    account: int | None = None  # the signed-in account an import upload is counted for


@dataclass(frozen=True)
class Refusal:
    status: int
    message: str


def _megabytes(size: int) -> str:
    return f"{size / 1024 / 1024:g} MB"


def too_large(limit: int) -> Refusal:
    return Refusal(
        413,
        f"The request body is larger than this server accepts here ({_megabytes(limit)} at "
        "most). Send less; files are imported from the dashboard's Import page, signed in.",
    )


def too_slow(timeout: float) -> Refusal:
    return Refusal(
        408,
        f"The request body did not arrive within {timeout:g} seconds: send it whole, at "
        "once, and try again.",
    )


BUSY = Refusal(
    503, "Taproot is busy: every database connection is in use. Try again in a few seconds."
)
UPLOAD_IN_PROGRESS = Refusal(
    429,
    "Another upload to the Import page is still in progress for this account. Wait for it "
    "to finish, then try again.",
)


def signed_in_account(session_key: str) -> int | None:
    """The id of the active account this session cookie is signed in as, or None.

    Django's own reading of a session (its auth hash checked, so a session of a changed
    password or a logged-out one counts for nothing); one or two queries.
    """
    request = HttpRequest()
    request.session = import_module(settings.SESSION_ENGINE).SessionStore(session_key)
    user = get_user(request)
    if user.is_authenticated and user.is_active:
        return int(user.pk)
    return None


def _session_key(scope: Scope) -> str | None:
    for name, value in scope.get("headers", []):
        if name.lower() == b"cookie":
            cookie: SimpleCookie = SimpleCookie()
            try:
                cookie.load(value.decode("latin-1"))
            except Exception:  # a malformed cookie header: no session in it
                return None
            morsel = cookie.get(settings.SESSION_COOKIE_NAME)
            if morsel is not None and morsel.value:
                return morsel.value
    return None


class _Metered:
    """Django's receive channel, counting the body's bytes against an allowance and its
    deadline. Past either it reports a disconnect (Django then drops the request) and
    notes why; once the body is whole it passes messages through (Django listens there for
    the client leaving while the view runs)."""

    def __init__(self, receive: Receive, allowance: Allowance) -> None:
        self.receive = receive
        self.allowance = allowance
        self.deadline = anyio.current_time() + allowance.timeout
        self.received = 0
        self.whole = False
        self.refusal: Refusal | None = None

    async def __call__(self) -> MutableMapping[str, Any]:
        if self.whole:
            return await self.receive()
        if self.refusal is not None:
            return DISCONNECT
        with anyio.move_on_after(self.deadline - anyio.current_time()):
            message = await self.receive()
            if message["type"] != "http.request":
                return message
            self.received += len(message.get("body", b""))
            if self.received > self.allowance.limit:
                self.refusal = too_large(self.allowance.limit)
                return DISCONNECT
            self.whole = not message.get("more_body", False)
            return message
        self.refusal = too_slow(self.allowance.timeout)
        return DISCONNECT


class BodyGate:
    """The ASGI app in front of Django for every request but /mcp (this module's
    docstring)."""

    def __init__(self, app: Any, *, import_path: str) -> None:
        from mcp_bridge.database import run_sync

        self.app = app
        self.run_sync = run_sync
        self.import_path = import_path
        self.limit = settings.TAPROOT_MAX_BODY_KB * 1024
        self.timeout = float(settings.TAPROOT_BODY_TIMEOUT)
        self.import_limit = settings.TAPROOT_IMPORT_MAX_MB * 1024 * 1024
        self.import_timeout = float(settings.TAPROOT_IMPORT_BODY_TIMEOUT)
        self.uploading: set[int] = set()  # accounts with an import upload in progress

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not has_body(scope):
            await self.app(scope, receive, send)
            return
        try:
            allowance = await self.allowance(scope)
        except DatabaseError as error:
            if not is_pool_timeout(error):
                raise
            await _refuse(send, BUSY)
            return
        declared = declared_length(scope)
        if declared is not None and declared > allowance.limit:
            await _refuse(send, too_large(allowance.limit))
            return
        if allowance.account is None:
            await self.serve(scope, receive, send, allowance)
            return
        if allowance.account in self.uploading:
            await _refuse(send, UPLOAD_IN_PROGRESS)
            return
        self.uploading.add(allowance.account)
        try:
            await self.serve(scope, receive, send, allowance)
        finally:
            self.uploading.discard(allowance.account)

    async def allowance(self, scope: Scope) -> Allowance:
        if scope.get("method") == "POST" and scope["path"] == self.import_path:
            key = _session_key(scope)
            account = await self.run_sync(signed_in_account, key) if key else None
            if account is not None:
                return Allowance(self.import_limit, self.import_timeout, account)
        return Allowance(self.limit, self.timeout)

    async def serve(self, scope: Scope, receive: Receive, send: Send, allowance: Allowance) -> None:
        metered = _Metered(receive, allowance)
        started = False

        async def noting_start(message: Mapping[str, Any]) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        await self.app(scope, metered, noting_start)
        if metered.refusal is not None and not started:
            await _refuse(send, metered.refusal)


async def _refuse(send: Send, refusal: Refusal) -> None:
    body = (refusal.message + "\n").encode()
    headers = [
        (b"content-type", b"text/plain; charset=utf-8"),
        (b"content-length", str(len(body)).encode()),
        CLOSE,
    ]
    if refusal.status in (429, 503):
        headers.append((b"retry-after", b"5"))
    await send({"type": "http.response.start", "status": refusal.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
