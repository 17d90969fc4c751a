"""The export download: streamed as it is read, byte for byte the whole document, one at a
time per account; through the test client, Django's own ASGI handler, and a live server."""

import asyncio
import http.client
import socket
import tracemalloc
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import urlsplit

import pytest
from asgiref.sync import sync_to_async
from django.core.asgi import get_asgi_application
from django.core.cache import cache
from django.test import Client

from memories.models import Memory
from memories.portability.exporting import EXPORT_BATCH, EXPORT_BUSY, Export
from tests.dashboard.conftest import downloaded
from tests.memories.exports import bulk_memories, compact, whole_document

URL = "/dashboard/export/"


def turn_is_held(user: Any) -> bool:
    return cache.get(f"taproot:export:{user.pk}") is not None


# Through the test client.


@pytest.mark.django_db
def test_the_download_is_byte_for_byte_the_compact_whole_document(logged_in, user, varied_store):
    response = logged_in.get(URL)

    body = downloaded(response)
    assert body.decode() == compact(whole_document(user, _exported_at(body)))
    assert not turn_is_held(user)


@pytest.mark.django_db
def test_a_download_is_refused_while_an_export_of_the_account_runs(logged_in, user):
    running = Export(owner=user)
    try:
        response = logged_in.get(URL)
    finally:
        running.close()

    assert response.status_code == 429
    assert response["Retry-After"] == "30"
    assert EXPORT_BUSY in response.content.decode()
    assert response["Content-Type"].startswith("text/html")
    assert downloaded(logged_in.get(URL)).startswith(b'{"format":"taproot/1"')


def _exported_at(body: bytes) -> str:
    import json

    return json.loads(body)["exported_at"]


# Through Django's ASGI handler, as uvicorn runs it.


def _session_cookie(user: Any) -> str:
    client = Client()
    client.force_login(user)
    return client.cookies["sessionid"].value


async def _asgi_get(
    cookie: str, on_body: Any = None, *, keep: bool = True
) -> tuple[int, list[bytes], int]:
    """One GET of the export through Django's ASGI handler: the status, the pieces of the
    body (unless keep=False) and its size. `on_body(chunks)` runs as each piece arrives,
    while the response waits for it."""
    app = get_asgi_application()
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": URL,
        "raw_path": URL.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"127.0.0.1"), (b"cookie", f"sessionid={cookie}".encode())],
        "client": ("127.0.0.1", 40000),
        "server": ("127.0.0.1", 8000),
    }
    requested = False

    async def receive() -> dict[str, Any]:
        nonlocal requested
        if not requested:
            requested = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await asyncio.Event().wait()  # the client stays
        raise AssertionError("unreachable")

    status = size = 0
    chunks: list[bytes] = []

    async def send(message: dict[str, Any]) -> None:
        nonlocal status, size
        if message["type"] == "http.response.start":
            status = message["status"]
        elif message.get("body"):
            size += len(message["body"])
            if keep:
                chunks.append(message["body"])
            if on_body is not None:
                await on_body(chunks)

    await app(scope, receive, send)
    return status, chunks, size


@pytest.mark.django_db(transaction=True)
def test_the_download_sends_its_first_entries_before_it_has_read_the_rest(user, varied_store):
    last_key = whole_document(user, "")["entries"][-1]["key"]
    seen_at_first_piece: list[Any] = []

    async def note_first_piece(chunks: list[bytes]) -> None:
        if len(chunks) == 1:
            held = await sync_to_async(turn_is_held, thread_sensitive=False)(user)
            seen_at_first_piece.append((held, last_key.encode() in chunks[0]))

    status, chunks, _ = asyncio.run(_asgi_get(_session_cookie(user), note_first_piece))

    assert status == 200
    # When the first piece went out, the export was still reading: it held the account's
    # turn and had not reached the last entry.
    assert seen_at_first_piece == [(True, False)]
    assert len(chunks) > 2
    body = b"".join(chunks)
    assert body.decode() == compact(whole_document(user, _exported_at(body)))
    assert not turn_is_held(user)


def _peak_of_a_download(cookie: str) -> tuple[int, int]:
    tracemalloc.start()
    try:
        status, _, size = asyncio.run(_asgi_get(cookie, keep=False))
        assert status == 200
        return tracemalloc.get_traced_memory()[1], size
    finally:
        tracemalloc.stop()


@pytest.mark.django_db(transaction=True)
def test_the_memory_a_download_takes_does_not_grow_with_the_store(user, other_user):
    bulk_memories(user, 500, content="word " * 400)
    bulk_memories(other_user, 3000, content="word " * 400)

    small_peak, small_size = _peak_of_a_download(_session_cookie(user))
    large_peak, large_size = _peak_of_a_download(_session_cookie(other_user))

    assert large_size > 6 * small_size > 6_000_000
    assert large_peak < 1.5 * small_peak, (small_peak, large_peak)
    assert large_peak < large_size / 2, (large_peak, large_size)


# Over real HTTP, against a live server.


@pytest.mark.server
@pytest.mark.django_db(transaction=True)
def test_a_second_download_is_refused_while_a_slow_one_runs(live_server_process, user):
    """A client that reads slowly holds the export midway (the server sends only as fast
    as it reads): meanwhile another download of the account is refused, and the slow one
    still gets the whole document."""
    bulk_memories(user, 2500, content="word " * 800)  # about 10 MB, more than the sockets hold
    cookie = _session_cookie(user)
    url = urlsplit(live_server_process.url)
    slow = http.client.HTTPConnection(url.hostname, url.port, timeout=60)
    slow.sock = socket.socket()
    slow.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16_384)
    slow.sock.settimeout(60)
    slow.sock.connect((url.hostname, url.port))
    slow.request("GET", URL, headers={"Cookie": f"sessionid={cookie}"})
    first = slow.getresponse()
    assert first.status == 200
    start = first.read(100_000)

    second = urllib.request.Request(
        live_server_process.url + URL, headers={"Cookie": f"sessionid={cookie}"}
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(second, timeout=30)
    rest = first.read()
    slow.close()

    assert refused.value.code == 429
    assert refused.value.headers["Retry-After"] == "30"
    assert EXPORT_BUSY in refused.value.read().decode()
    body = start + rest
    assert Memory.objects.filter(owner=user).count() == 2500
    assert body.decode() == compact(whole_document(user, _exported_at(body)))
    with urllib.request.urlopen(second, timeout=60) as again:  # the turn was given back
        assert again.status == 200
        assert len(again.read()) == len(body)
    assert EXPORT_BATCH < 2500
