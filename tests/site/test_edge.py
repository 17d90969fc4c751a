"""The edge (taproot_site.edge): what a request other than /mcp may send before Django
reads it. A real server with small limits, and real sockets: nothing unauthenticated
reaches the disk, and no body may take its time.

Django spools a body past FILE_UPLOAD_MAX_MEMORY_SIZE (2.5 MB) to a temporary file before
any view runs; the server here is given a temporary folder of its own (TMPDIR), so a
spooled body would show there.
"""

import re
import socket
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx2
import pytest
from django.test import Client

from tests.live_server import LiveServer, run_server

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.server]

MAX_BODY_KB = 64
BODY_TIMEOUT = 2
IMPORT_MAX_MB = 4


@pytest.fixture(scope="module")
def server_tmp(tmp_path_factory: Any) -> Path:
    return Path(tmp_path_factory.mktemp("edge-tmp"))


@pytest.fixture(scope="module")
def edge(
    django_db_setup: None, django_db_blocker: Any, tmp_path_factory: Any, server_tmp: Path
) -> Iterator[LiveServer]:
    env = {
        "TAPROOT_MAX_BODY_KB": str(MAX_BODY_KB),
        "TAPROOT_BODY_TIMEOUT": str(BODY_TIMEOUT),
        "TAPROOT_IMPORT_MAX_MB": str(IMPORT_MAX_MB),
        "TAPROOT_IMPORT_BODY_TIMEOUT": "20",
        "TMPDIR": str(server_tmp),
    }
    with (
        django_db_blocker.unblock(),
        run_server(tmp_dir=tmp_path_factory.mktemp("edge"), env=env) as server,
    ):
        yield server


def open_socket(server: LiveServer) -> socket.socket:
    address = urlsplit(server.url)
    return socket.create_connection((address.hostname, address.port), timeout=30)


def head(
    server: LiveServer,
    path: str,
    *,
    length: int | None,
    cookie: str | None = None,
    content_type: str = "application/x-www-form-urlencoded",
) -> bytes:
    lines = [
        f"POST {path} HTTP/1.1".encode(),
        f"Host: {urlsplit(server.url).netloc}".encode(),
        f"Content-Type: {content_type}".encode(),
    ]
    if cookie is not None:
        lines.append(f"Cookie: {cookie}".encode())
    if length is None:
        lines.append(b"Transfer-Encoding: chunked")
    else:
        lines.append(f"Content-Length: {length}".encode())
    return b"\r\n".join(lines) + b"\r\n\r\n"


def answer_of(sock: socket.socket) -> str:
    received = b""
    while True:
        try:
            data = sock.recv(65536)
        except OSError:
            break
        if not data:
            break
        received += data
        head_, _, body = received.partition(b"\r\n\r\n")
        length = re.search(rb"(?im)^content-length: *(\d+)", head_)
        if length and len(body) >= int(length.group(1)):
            break
    return received.decode("latin-1")


def status_of(answer: str) -> int | None:
    return int(answer.split(" ", 2)[1]) if answer else None


def spooled(folder: Path) -> list[Path]:
    return [path for path in folder.rglob("*") if path.is_file()]


@pytest.mark.parametrize("path", ["/accounts/login/", "/healthz", "/no/such/page/"])
def test_a_declared_body_over_the_limit_is_answered_413_unread(edge, path):
    with open_socket(edge) as sock:
        sock.sendall(head(edge, path, length=3_000 * 1024 * 1024))
        answer = answer_of(sock)
    assert status_of(answer) == 413, answer
    headers, _, text = answer.partition("\r\n\r\n")
    assert "connection: close" in headers.lower()
    assert text.startswith("The request body is larger than this server accepts here (0.0625 MB")


def test_a_chunked_body_is_cut_where_it_passes_the_limit_and_never_reaches_the_disk(
    edge, server_tmp
):
    chunk = b"x" * 65536
    with open_socket(edge) as sock:
        sock.sendall(head(edge, "/healthz", length=None))
        answer = ""
        sent = 0
        try:
            # 5 MB in all unless cut: twice what Django keeps in memory before spooling.
            for _ in range(80):
                sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                sent += len(chunk)
                assert not spooled(server_tmp)
        except OSError:  # answered and closed on the way
            pass
        answer = answer_of(sock)
    assert status_of(answer) == 413, answer
    assert sent < 5 * 1024 * 1024
    assert not spooled(server_tmp)


def test_a_body_that_does_not_arrive_in_time_is_answered_408(edge):
    began = time.monotonic()
    with open_socket(edge) as sock:
        sock.sendall(head(edge, "/accounts/login/", length=1000) + b"username=")
        answer = answer_of(sock)
    assert status_of(answer) == 408, answer
    assert BODY_TIMEOUT <= time.monotonic() - began < BODY_TIMEOUT + 5
    assert f"did not arrive within {BODY_TIMEOUT} seconds" in answer


def test_bodies_within_the_limit_are_served_as_before(edge, user):
    page = httpx2.get(f"{edge.url}/accounts/login/", timeout=10)
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
    assert token is not None
    form = {"csrfmiddlewaretoken": token[1], "username": user.username, "password": "wrong"}
    answer = httpx2.post(f"{edge.url}/accounts/login/", data=form, cookies=page.cookies, timeout=10)
    assert answer.status_code == 200
    assert "Please enter a correct username and password" in answer.text


def signed_in_cookie(user: Any) -> str:
    browser = Client()
    browser.force_login(user)
    return f"sessionid={browser.cookies['sessionid'].value}"


def import_form(server: LiveServer, cookie: str) -> tuple[dict[str, str], dict[str, str]]:
    """The import page's CSRF field and the cookies to send with its form."""
    session = cookie.split("=", 1)[1]
    page = httpx2.get(f"{server.url}/dashboard/import/", cookies={"sessionid": session})
    assert page.status_code == 200, page.text
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
    assert token is not None
    return {"csrfmiddlewaretoken": token[1]}, {"sessionid": session, **page.cookies}


def notes_file(count: int) -> bytes:
    """A plain list of `count` different notes, one a bullet."""
    return "".join(
        f"- Tide table {n} is printed on the harbour wall.\n" for n in range(count)
    ).encode()


def test_a_signed_in_account_may_upload_an_import_past_the_small_limit(edge, user):
    data, cookies = import_form(edge, signed_in_cookie(user))
    upload = notes_file(6000)  # 300 KB or so: far past the 64 KiB every other request may send
    assert len(upload) > 250 * 1000
    answer = httpx2.post(
        f"{edge.url}/dashboard/import/",
        data=data,
        files={"file": ("notes.txt", upload, "text/plain")},
        cookies=cookies,
        timeout=60,
    )
    assert answer.status_code == 200, answer.text
    # The first step of an import is its check (a dry run): the whole file was read.
    assert "Dry run: 6000 memories" in answer.text, answer.text


@pytest.mark.parametrize("cookie", [None, "sessionid=not-a-session", "sessionid=", "a=b; =;;"])
def test_an_import_upload_without_a_signed_in_session_has_the_small_limit(edge, cookie):
    with open_socket(edge) as sock:
        sock.sendall(head(edge, "/dashboard/import/", length=300 * 1024, cookie=cookie))
        answer = answer_of(sock)
    assert status_of(answer) == 413, answer


def test_an_import_upload_past_the_import_limit_is_refused_unread(edge, user):
    length = IMPORT_MAX_MB * 1024 * 1024 + 1
    with open_socket(edge) as sock:
        sock.sendall(head(edge, "/dashboard/import/", length=length, cookie=signed_in_cookie(user)))
        answer = answer_of(sock)
    assert status_of(answer) == 413, answer
    assert f"({IMPORT_MAX_MB} MB at most)" in answer


def test_one_import_upload_per_account_at_a_time(edge, user, other_user):
    mine = signed_in_cookie(user)
    with open_socket(edge) as first:
        # An upload on its way: 1 MB declared, a part of it sent.
        first.sendall(head(edge, "/dashboard/import/", length=1024 * 1024, cookie=mine) + b"--x")
        time.sleep(0.5)  # its head is in, its session looked up
        with open_socket(edge) as second:
            second.sendall(head(edge, "/dashboard/import/", length=1024, cookie=mine))
            answer = answer_of(second)
        assert status_of(answer) == 429, answer
        assert "Another upload to the Import page is still in progress" in answer
        # Another account is not held up by it.
        with ThreadPoolExecutor(1) as pool:
            theirs = pool.submit(import_form, edge, signed_in_cookie(other_user)).result()
        assert theirs[0]["csrfmiddlewaretoken"]
