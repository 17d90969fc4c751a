"""What a /mcp request gets through before it may touch the database.

uvicorn hands the application a request as soon as its headers are in and has no limit
on how long the body may take. A request that borrowed a database connection first (the
bearer-token lookup does) and then waited for a body sent a few bytes at a time would
hold that connection all along, and a handful of such requests would leave every other
user waiting for one. So each /mcp request first takes a slot among the requests its
token may have in progress at once, then arrives whole within a deadline, and only then
reaches anything that uses the database.
"""

import hashlib
from collections import Counter
from collections.abc import Iterator, MutableMapping
from contextlib import contextmanager
from typing import Any

import anyio
from starlette.types import Receive, Scope


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


async def read_body(receive: Receive, *, timeout: float, limit: int) -> bytes:
    """The whole request body, or TimeoutError when it takes longer than `timeout` seconds.

    Raises ClientGone when the client disconnects first and BodyTooLarge past `limit`
    bytes (nothing more is read then).
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
            if not message.get("more_body", False):
                return bytes(body)


def replaying(body: bytes, receive: Receive) -> Receive:
    """A receive channel that hands over `body` whole, then waits on the real one
    (which reports the client's disconnect)."""
    pending = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive_again() -> MutableMapping[str, Any]:
        if pending:
            return pending.pop()
        return await receive()

    return receive_again


class TokenSlots:
    """How many /mcp requests each bearer token has in progress in this process.

    Keyed by a digest of the Authorization header, so the table holds no token, and a
    token's entry lasts only while it has requests in progress. One event loop serves
    them all: no lock is needed.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.in_progress: Counter[str] = Counter()

    @contextmanager
    def hold(self, authorization: bytes | None) -> Iterator[bool]:
        """Takes a slot for the token for the duration of the block; yields False (and
        takes none) when the token already has `limit` requests in progress.

        A request without a token needs no slot: it is answered with the 401 challenge,
        without touching the database.
        """
        if authorization is None:
            yield True
            return
        key = hashlib.sha256(authorization).hexdigest()
        if self.in_progress[key] >= self.limit:
            yield False
            return
        self.in_progress[key] += 1
        try:
            yield True
        finally:
            self.in_progress[key] -= 1
            if not self.in_progress[key]:
                del self.in_progress[key]
