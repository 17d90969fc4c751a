"""One client cannot stall the others: /mcp answers a request without a bearer token of
the right shape before reading its body; it reads a request's whole body, within a
deadline and within what the process may hold for requests not yet running, before
anything touches the database; a request that finds no free pooled connection is answered
503 with Retry-After, on /mcp and on Django's pages. (How many requests a user may have
in progress: tests/mcp/test_bursts.py.)

Real uvicorn servers with short deadlines (set through the environment, as an operator
would), and real slow clients: raw sockets that send a body a few bytes at a time.
"""

import contextlib
import json
import re
import select
import socket
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import urlsplit

import httpx2
import pytest
from django.db import connection, transaction
from django.test import Client

from tests.conftest import is_postgres
from tests.live_server import LiveServer, run_server
from tests.mcp.client import McpCaller, mcp_client
from tests.mcp.test_auth import INITIALIZE
from tests.mcp.test_endpoint import ACCEPT, connection_states, post, settle
from tests.mcp.tokens import make_access_token

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.server]

BODY = json.dumps(INITIALIZE).encode()
BODY_TIMEOUT = 2
# Sent 4 bytes every quarter second, BODY would take over ten seconds to arrive.
assert len(BODY) / 4 * 0.25 > 5 * BODY_TIMEOUT
GUARDED = {
    "TAPROOT_MCP_BODY_TIMEOUT": str(BODY_TIMEOUT),
    "TAPROOT_MCP_BUFFER_MB": "4",
    "TAPROOT_DB_POOL_SIZE": "2",
    "TAPROOT_DB_POOL_TIMEOUT": "1",
}
LOG_LINE = r"\S+ \S+ INFO taproot\.mcp "
RECALL = {
    "jsonrpc": "2.0",
    "id": 2,
    "method": "tools/call",
    "params": {"name": "taproot_recall", "arguments": {"query": "tide table"}},
}


@pytest.fixture(scope="module")
def guarded(
    django_db_setup: None, django_db_blocker: Any, tmp_path_factory: Any
) -> Iterator[LiveServer]:
    with (
        django_db_blocker.unblock(),
        run_server(tmp_dir=tmp_path_factory.mktemp("guarded"), env=GUARDED) as server,
    ):
        yield server


def mcp_token(server: LiveServer, user: Any) -> str:
    return make_access_token(user, resource=f"{server.url}/mcp")


def request_head(server: LiveServer, token: str) -> bytes:
    return raw_head(server, f"Bearer {token}".encode(), length=len(BODY))


def call(server: LiveServer, token: str, body: dict[str, Any]) -> httpx2.Response:
    headers = {**ACCEPT, "Authorization": f"Bearer {token}"}
    return httpx2.post(f"{server.url}/mcp", json=body, headers=headers, timeout=30)


def raw_head(server: LiveServer, authorization: bytes | None, *, length: int | None) -> bytes:
    """The head of a POST to /mcp: with this Authorization header (none for None), and a
    body of `length` bytes to follow (chunked for None)."""
    lines = [
        b"POST /mcp HTTP/1.1",
        f"Host: {urlsplit(server.url).netloc}".encode(),
        b"Content-Type: application/json",
        b"Accept: application/json, text/event-stream",
    ]
    if authorization is not None:
        lines.append(b"Authorization: " + authorization)
    if length is None:
        lines.append(b"Transfer-Encoding: chunked")
    else:
        lines.append(f"Content-Length: {length}".encode())
    return b"\r\n".join(lines) + b"\r\n\r\n"


def open_socket(server: LiveServer) -> socket.socket:
    address = urlsplit(server.url)
    return socket.create_connection((address.hostname, address.port), timeout=30)


def slow_post(server: LiveServer, token: str) -> str:
    """POST an initialize request to /mcp with its body sent 4 bytes every quarter second,
    until all of it is sent or the server answers; the server's answer ("" for none)."""
    with open_socket(server) as sock:
        sock.sendall(request_head(server, token))
        for start in range(0, len(BODY), 4):
            answered, _, _ = select.select([sock], [], [], 0.25)
            if answered:
                break
            try:
                sock.sendall(BODY[start : start + 4])
            except OSError:  # the server answered and closed in between
                break
        return read_answer(sock)


def read_answer(sock: socket.socket) -> str:
    received = b""
    while b"\r\n\r\n" not in received:
        data = sock.recv(4096)
        if not data:
            return received.decode()
        received += data
    head, _, body = received.partition(b"\r\n\r\n")
    length = re.search(rb"(?im)^content-length: *(\d+)", head)
    while length and len(body) < int(length.group(1)):
        data = sock.recv(4096)
        if not data:
            break
        body += data
    return (head + b"\r\n\r\n" + body).decode()


def status_of(answer: str) -> int | None:
    return int(answer.split(" ", 2)[1]) if answer else None


def eventually(check: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_a_body_that_does_not_arrive_in_time_is_answered_408(guarded, user):
    start = guarded.log_position()
    began = time.monotonic()
    answer = slow_post(guarded, mcp_token(guarded, user))
    assert status_of(answer) == 408, answer
    assert BODY_TIMEOUT <= time.monotonic() - began < BODY_TIMEOUT + 2
    assert "connection: close" in answer.lower()
    message = json.loads(answer.partition("\r\n\r\n")[2])["error"]["message"]
    assert message == (
        f"The request body did not arrive within {BODY_TIMEOUT} seconds: "
        "send the whole request at once and try again."
    )
    log = guarded.wait_for_log("status=408", since=start)
    # The token was looked up from the header, on a database thread that gave its
    # connection back before the body was waited for.
    expected = LOG_LINE + rf"POST - user={user.pk} status=408 outcome=body_timeout \d+\.\dms\n"
    assert re.fullmatch(expected, log), log


NOT_BEARER_TOKENS = [
    None,
    b"Basic YWxpY2U6cHc=",
    b"Token abc",
    b"Bearer",
    b"Bearer two words",
    b"Bearer tok\xf8n",
    b"Bearer abc=def",
    b"Bearer " + b"x" * 600,
]


def test_a_request_without_a_bearer_token_of_the_right_shape_is_answered_401_unread(guarded):
    """Its body is never sent: had the server waited for it, the answer would be 408."""
    start = guarded.log_position()
    for authorization in NOT_BEARER_TOKENS:
        with open_socket(guarded) as sock:
            sock.sendall(raw_head(guarded, authorization, length=len(BODY)))
            answer = read_answer(sock)
        assert status_of(answer) == 401, (authorization, answer)
        head = answer.partition("\r\n\r\n")[0].lower()
        metadata = f'resource_metadata="{guarded.url}/.well-known/oauth-protected-resource/mcp"'
        assert metadata in head, answer
        # Its body would follow on this connection: the server closes it instead.
        assert "connection: close" in head, answer
    # Each request is logged once it is answered: the last may be on its way.
    eventually(lambda: len(guarded.log(since=start).splitlines()) >= len(NOT_BEARER_TOKENS), 5)
    log = guarded.log(since=start)
    lines = log.splitlines()
    assert len(lines) == len(NOT_BEARER_TOKENS), log
    for line in lines:
        assert re.fullmatch(LOG_LINE + r"POST - user=- status=401 \d+\.\dms", line), log


# Well-formed, but no token of ours.
UNKNOWN = b"Bearer " + b"u" * 43
HELD = 3_000_000  # of the guarded server's 4 MiB (4,194,304 bytes)


def offered(server: LiveServer, head: bytes, body: bytes = b"") -> str:
    """The server's answer to `head` (and `body`) within half a second, or "" (and the
    request abandoned, which gives back what it held)."""
    with open_socket(server) as sock:
        # OSError: answered and closed while the body was going out.
        with contextlib.suppress(OSError):
            sock.sendall(head + body)
        answered, _, _ = select.select([sock], [], [], 0.5)
        return read_answer(sock) if answered else ""


def test_an_unknown_token_is_answered_401_before_its_body_is_read(guarded, user):
    """24 sockets with a made-up token, each declaring the largest body and sending none,
    are answered at once and hold nothing: a real user's calls all succeed (they got 503
    when a declared length was claimed before the token was known)."""
    start = guarded.log_position()
    sockets = [open_socket(guarded) for _ in range(24)]
    try:
        for sock in sockets:
            sock.sendall(raw_head(guarded, UNKNOWN, length=4 * 1024 * 1024))
        for sock in sockets:
            answer = read_answer(sock)
            assert status_of(answer) == 401, answer
            assert "connection: close" in answer.partition("\r\n\r\n")[0].lower()
        token = mcp_token(guarded, user)
        for _ in range(10):
            found = call(guarded, token, RECALL)
            assert found.status_code == 200, found.text
            assert not found.json()["result"]["isError"], found.text
    finally:
        for sock in sockets:
            sock.close()
    eventually(lambda: guarded.log(since=start).count("status=401") >= 24, 5)
    assert guarded.log(since=start).count("user=- status=401") == 24


def test_a_declared_length_holds_nothing_until_its_bytes_arrive(guarded, user, other_user):
    """A known user's sockets that declare the largest body and send none take nothing
    from what the worker may hold: another user's calls are served meanwhile."""
    idle = mcp_token(guarded, other_user)
    sockets = [open_socket(guarded) for _ in range(4)]
    try:
        for sock in sockets:
            sock.sendall(raw_head(guarded, f"Bearer {idle}".encode(), length=4 * 1024 * 1024))
        time.sleep(0.3)  # their heads are in, their tokens looked up
        token = mcp_token(guarded, user)
        for _ in range(3):
            assert call(guarded, token, RECALL).status_code == 200
    finally:
        for sock in sockets:
            sock.close()


def hold_bytes(server: LiveServer, token: str, sent: int) -> socket.socket:
    """A socket whose request declared 4,000,000 bytes and sent `sent` of them; the rest
    never comes (the server answers 408 at its deadline)."""
    sock = open_socket(server)
    sock.sendall(raw_head(server, f"Bearer {token}".encode(), length=4_000_000) + b"x" * sent)
    return sock


def test_a_body_past_what_the_worker_may_hold_is_answered_503_as_it_arrives(
    guarded, user, other_user
):
    start = guarded.log_position()
    with hold_bytes(guarded, mcp_token(guarded, other_user), HELD) as holder:
        time.sleep(0.3)  # its bytes are in before the others'
        token = f"Bearer {mcp_token(guarded, user)}".encode()
        padded = b"x" * 2_000_000
        refusals: list[str] = []

        def refused() -> bool:
            refusals.append(offered(guarded, raw_head(guarded, token, length=len(padded)), padded))
            return status_of(refusals[-1]) == 503

        assert eventually(refused, timeout=BODY_TIMEOUT / 2), refusals[-1]
        refusal = refusals[-1]
        head, _, body = refusal.partition("\r\n\r\n")
        assert "retry-after: 5" in head.lower() and "connection: close" in head.lower()
        assert json.loads(body)["error"]["message"] == (
            "Taproot is receiving too many requests at once. Try again in 5 seconds."
        )
        # Bodies that fit are still taken.
        assert post(f"{guarded.url}/mcp", mcp_token(guarded, user)).status_code == 200
        assert status_of(read_answer(holder)) == 408
    # The holder's bytes went with it: 2,000,000 bytes fit now, and are served.
    padded = json.dumps(INITIALIZE).encode().ljust(2_000_000)
    with open_socket(guarded) as sock:
        sock.sendall(raw_head(guarded, token, length=len(padded)) + padded)
        assert status_of(read_answer(sock)) == 200
    log = guarded.wait_for_log("outcome=buffer_full", since=start)
    assert re.search(rf"POST - user={user.pk} status=503 outcome=buffer_full \d", log), log
    assert "Traceback" not in log


def test_a_chunked_body_is_counted_as_it_arrives_and_refused_past_the_limit(
    guarded, user, other_user
):
    chunk = b"x" * 100_000
    chunks = b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for _ in range(20))
    token = f"Bearer {mcp_token(guarded, user)}".encode()
    with hold_bytes(guarded, mcp_token(guarded, other_user), HELD) as holder:
        time.sleep(0.3)  # its bytes are in before the others'
        answers: list[str] = []

        def refused() -> bool:
            answers.append(offered(guarded, raw_head(guarded, token, length=None), chunks))
            return status_of(answers[-1]) == 503

        # 2,000,000 bytes sent in chunks, of the 1,194,304 left: refused on the way.
        assert eventually(refused, timeout=BODY_TIMEOUT / 2), answers[-1]
        assert "connection: close" in answers[-1].lower()
        assert status_of(read_answer(holder)) == 408


def test_a_body_over_the_limit_is_refused_at_once_and_unread(guarded, user):
    head = request_head(guarded, mcp_token(guarded, user))
    oversized = head.replace(f"Content-Length: {len(BODY)}".encode(), b"Content-Length: 5000000")
    with open_socket(guarded) as sock:
        sock.sendall(oversized)
        answer = read_answer(sock)
    assert status_of(answer) == 413, answer
    assert answer.endswith("\r\n\r\nRequest body too large")  # the SDK's own answer


def test_a_client_that_leaves_mid_body_is_logged_once_as_499(guarded, user):
    start = guarded.log_position()
    with open_socket(guarded) as sock:
        sock.sendall(request_head(guarded, mcp_token(guarded, user)) + BODY[:20])
        time.sleep(0.2)  # the server is reading the body by now
    guarded.wait_for_log("status=", since=start)
    time.sleep(0.3)  # anything the server would write after its request line
    log = guarded.log(since=start)
    expected = LOG_LINE + rf"POST - user={user.pk} status=499 outcome=client_gone \d+\.\dms\n"
    assert re.fullmatch(expected, log), log


def test_another_users_calls_keep_succeeding_while_one_token_holds_30_slow_bodies(
    tmp_path, portal, user, other_user
):
    """The load test. On SQLite, which has no pool to drain, it shows the same guarantee
    (the other user is served and the slow bodies end in 408), but the starvation it
    guards against happens only with PostgreSQL's pool."""
    # Long enough for Alice's calls on a busy machine; short of the 10.5 s a slow body takes.
    env = {**GUARDED, "TAPROOT_MCP_BODY_TIMEOUT": "8"}
    with run_server(tmp_dir=tmp_path, env=env) as server:
        mallory = mcp_token(server, other_user)
        alice = mcp_token(server, user)
        # A first write loads the embedding model: on a busy machine that alone can pass
        # the short timeout below, and it is not what this test is about.
        with portal.wrap_async_context_manager(
            mcp_client(f"{server.url}/mcp", alice, mode="legacy")
        ) as client:
            warm_up = {"category": "episodic", "content": "Tide table.", "gist": "Tide table"}
            McpCaller(portal=portal, client=client).reply("taproot_remember", warm_up)
        with ThreadPoolExecutor(30) as pool:
            slow = [pool.submit(slow_post, server, mallory) for _ in range(30)]
            time.sleep(0.5)  # all 30 are in, trickling their bodies
            session = mcp_client(f"{server.url}/mcp", alice, mode="legacy", timeout=5)
            with portal.wrap_async_context_manager(session) as client:
                mcp = McpCaller(portal=portal, client=client)
                for i in range(3):
                    gist = f"Lighthouse keeper note {i}"
                    mcp.reply(
                        "taproot_remember",
                        {"category": "episodic", "content": f"{gist}.", "gist": gist},
                    )
                found = mcp.reply("taproot_recall", {"query": "lighthouse keeper"})
                assert len(found["results"]) == 3
                assert mcp.reply("taproot_status")["live_memories"] == 4
            for _ in range(3):
                assert httpx2.get(f"{server.url}/healthz", timeout=5).status_code == 200
            # Alice was served while all 30 were still open.
            assert not any(request.done() for request in slow)
            answers = [request.result() for request in slow]
        assert [status_of(answer) for answer in answers] == [408] * 30
        assert "Traceback" not in server.log()


# --- The pool itself (PostgreSQL only) ---------------------------------------------------

POOL_OF_ONE_NAME = "taproot-test-pool-of-one"  # tells this server's connections apart
POOL_OF_ONE = {
    "TAPROOT_DB_POOL_SIZE": "1",
    "TAPROOT_DB_POOL_TIMEOUT": "1",
    "PGAPPNAME": POOL_OF_ONE_NAME,
}


def postgres_only() -> None:
    if not is_postgres():
        pytest.skip(
            "the connection pool exists only on PostgreSQL (DATABASE_URL=postgres://…); "
            "CI runs this in its PostgreSQL pass"
        )


def someone_waits_on_a_lock() -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_locks WHERE NOT granted")
        return cursor.fetchone()[0] > 0


@pytest.mark.postgres
def test_a_request_that_finds_no_free_connection_is_answered_503_with_retry_after(
    tmp_path, user, other_user
):
    postgres_only()
    with run_server(tmp_dir=tmp_path, env=POOL_OF_ONE) as server:
        url = f"{server.url}/mcp"
        alice, bob = mcp_token(server, user), mcp_token(server, other_user)
        browser = Client()
        browser.force_login(user)
        cookies = {"sessionid": browser.cookies["sessionid"].value}
        start = server.log_position()
        with ThreadPoolExecutor(1) as pool:
            with transaction.atomic():
                with connection.cursor() as cursor:
                    cursor.execute(
                        "LOCK TABLE oauth2_provider_accesstoken IN ACCESS EXCLUSIVE MODE"
                    )
                # Alice's call takes the server's only connection and waits on the lock.
                held = pool.submit(post, url, alice)
                assert eventually(someone_waits_on_a_lock, timeout=5)
                busy = [
                    post(url, bob),
                    httpx2.get(f"{server.url}/healthz", timeout=10),
                    httpx2.get(f"{server.url}/dashboard/", cookies=cookies, timeout=10),
                ]
            # The lock is gone with the transaction: Alice's call completes.
            assert held.result().status_code == 200
        for response in busy:
            assert response.status_code == 503, (response.url, response.text)
            assert response.headers["retry-after"] == "5", response.url
        message = "Taproot is busy: every database connection is in use. Try again in 5 seconds."
        assert busy[0].json()["error"]["message"] == message
        assert busy[1].text == busy[2].text == message
        log = server.log(since=start)
        assert re.search(r"POST - user=- status=503 outcome=database_busy \d", log), log
        assert "Traceback" not in log
        # Once the connection is back, everyone is served again.
        assert post(url, bob).status_code == 200
        assert httpx2.get(f"{server.url}/healthz", timeout=10).status_code == 200


@pytest.mark.postgres
def test_a_pooled_connection_the_database_dropped_is_replaced_before_it_is_lent(tmp_path, user):
    postgres_only()
    with run_server(tmp_dir=tmp_path, env=POOL_OF_ONE) as server:
        url = f"{server.url}/mcp"
        token = mcp_token(server, user)
        assert post(url, token).status_code == 200
        states = settle(lambda: connection_states(POOL_OF_ONE_NAME), lambda s: s == ["idle"])
        assert states == ["idle"]
        # As a database restart or an idle timeout on the way would.
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND application_name = %s",
                [POOL_OF_ONE_NAME],
            )
        assert post(url, token).status_code == 200
        assert httpx2.get(f"{server.url}/healthz", timeout=10).status_code == 200
        assert "Traceback" not in server.log()
