"""What Claude did, for the person (issue 31): the clients page shows each client's last
calls over real HTTP with the real MCP client, the last refusal of its token with the
reason in words, and nothing of another user's. The server writes what it noted once a
second (mcp_bridge.activity), so the tests wait for it."""

import time
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

import anyio
import httpx2
import pytest
from django.db import DatabaseError, OperationalError, connection, transaction
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone
from oauth2_provider.models import get_refresh_token_model

from mcp_bridge import activity
from memories.locks import is_lock_timeout
from oauth.activity import CALLS_KEPT, NotedCall, NotedRefusal, keep
from oauth.models import ClientCall, ClientRefusal, RefusalReason
from tests.conftest import is_postgres
from tests.mcp.client import McpCaller
from tests.mcp.test_endpoint import ACCEPT, tool_call
from tests.mcp.test_slow_clients import eventually
from tests.mcp.tokens import make_access_token, make_application
from tests.page_text import page_text

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.server]

# The server writes its notes every second; the wait allows for a loaded machine.
WRITTEN_WITHIN = 10


def written(query: Any, count: int) -> None:
    assert eventually(lambda: query.count() == count, timeout=WRITTEN_WITHIN), list(query)


def clients_page(user: Any) -> str:
    browser = Client()
    browser.force_login(user)
    response = browser.get(reverse("dashboard:clients"))
    assert response.status_code == 200
    return response.content.decode()


def refused(mcp_url: str, token: str) -> None:
    response = httpx2.post(
        mcp_url,
        json=tool_call("taproot_status", {}),
        headers={**ACCEPT, "Authorization": f"Bearer {token}"},
        timeout=10,
    )
    assert response.status_code == 401, response.text


def a_live_refresh_token(user: Any, application: Any) -> None:
    """What keeps a client on the page once its access token expired."""
    get_refresh_token_model().objects.create(
        user=user, application=application, token=f"refresh-{user.pk}-{application.pk}"
    )


def test_the_clients_page_lists_a_clients_last_calls_ok_or_error(
    connect: Any, mcp_url: str, user: Any, other_user: Any
) -> None:
    claude = make_application(name="Claude")
    caller: McpCaller = connect(make_access_token(user, resource=mcp_url, application=claude))
    assert caller.reply(
        "taproot_remember", {"category": "episodic", "content": "Saw a heron.", "gist": "A heron"}
    )
    assert "memory_id" in caller.refusal("taproot_forget", {"action": "archive", "memory_id": "no"})
    # Refused by the SDK itself, before any tool runs: the name is Claude's, not kept.
    assert caller.call("taproot_<b>nonesuch</b>", {}).is_error
    # Bob holds a token of the same client, and has called nothing.
    make_access_token(other_user, resource=mcp_url, application=claude)

    written(ClientCall.objects.filter(user=user), 3)
    calls = list(ClientCall.objects.filter(user=user).order_by("id"))
    assert [(c.tool, c.ok, c.application_id) for c in calls] == [
        ("taproot_remember", True, claude.pk),
        ("taproot_forget", False, claude.pk),
        ("(unknown)", False, claude.pk),
    ]
    text = page_text(clients_page(user))
    assert "Its last 3 calls" in text
    assert "(unknown) error" in text and "nonesuch" not in text
    assert "taproot_forget error" in text
    assert "taproot_remember ok" in text
    assert "last call" in text and "none yet" not in text

    theirs = page_text(clients_page(other_user))
    assert "Claude" in theirs
    assert "taproot_remember" not in theirs and "taproot_forget" not in theirs
    assert "none yet" in theirs


@pytest.mark.parametrize(
    ("overrides", "reason"),
    [
        ({"expires_in": -timedelta(minutes=5)}, "its access token had expired"),
        ({"resource": "https://elsewhere.example/mcp"}, "issued for another server address"),
    ],
)
def test_a_refused_token_shows_its_reason_to_its_owner_only(
    mcp_url: str, user: Any, other_user: Any, overrides: dict[str, Any], reason: str
) -> None:
    claude = make_application(name="Claude")
    a_live_refresh_token(user, claude)
    a_live_refresh_token(other_user, claude)
    token = make_access_token(
        user, resource=overrides.pop("resource", mcp_url), application=claude, **overrides
    )
    refused(mcp_url, token)
    refused(mcp_url, "never-issued-to-anyone")

    written(ClientRefusal.objects.all(), 1)
    assert list(ClientRefusal.objects.values_list("user", "application")) == [(user.pk, claude.pk)]
    text = page_text(clients_page(user))
    assert "last refused" in text and reason in text
    assert "no call has gone through since" in text
    theirs = page_text(clients_page(other_user))
    assert "last refused" not in theirs


def test_a_call_after_a_refusal_clears_the_warning_but_keeps_the_refusal(
    connect: Any, mcp_url: str, user: Any
) -> None:
    claude = make_application(name="Claude")
    refused(
        mcp_url,
        make_access_token(
            user, resource=mcp_url, application=claude, expires_in=-timedelta(minutes=1)
        ),
    )
    written(ClientRefusal.objects.all(), 1)
    caller: McpCaller = connect(make_access_token(user, resource=mcp_url, application=claude))
    caller.reply("taproot_status", {})
    written(ClientCall.objects.all(), 1)
    text = page_text(clients_page(user))
    assert "its access token had expired" in text
    assert "no call has gone through since" not in text


def test_a_clients_page_keeps_its_last_calls_only(connect: Any, mcp_url: str, user: Any) -> None:
    claude = make_application(name="Claude")
    caller: McpCaller = connect(make_access_token(user, resource=mcp_url, application=claude))
    caller.reply("taproot_remember", {"category": "episodic", "content": "First.", "gist": "1st"})
    for _ in range(CALLS_KEPT + 4):
        caller.reply("taproot_status", {})

    # Once CALLS_KEPT later calls are written, the first is gone, and stays gone.
    written(ClientCall.objects.filter(tool="taproot_status"), CALLS_KEPT)
    assert not ClientCall.objects.filter(tool="taproot_remember").exists()
    assert ClientCall.objects.filter(user=user, application=claude).count() == CALLS_KEPT
    text = page_text(clients_page(user))
    assert f"Its last {CALLS_KEPT} calls" in text
    assert text.count("taproot_status ok") == CALLS_KEPT


def test_only_the_last_calls_are_kept_per_user_and_client(user: Any, other_user: Any) -> None:
    claude, other = make_application(name="Claude"), make_application(name="Other")

    def call(user: Any, application: Any, n: int, *, ok: bool = True) -> NotedCall:
        return NotedCall(user.pk, application.pk, timezone.now(), f"tool_{n}", ok)

    keep([call(other_user, claude, 0)], [])
    # Kept in two writes: one with more than CALLS_KEPT of a client's calls at once, one
    # that pushes the earlier ones out.
    keep([call(user, claude, n) for n in range(CALLS_KEPT + 2)], [])
    keep(
        [call(user, claude, n) for n in range(CALLS_KEPT + 2, CALLS_KEPT + 5)]
        + [call(user, other, n, ok=n % 2 == 0) for n in range(CALLS_KEPT + 5)],
        [],
    )
    kept = list(
        ClientCall.objects.filter(user=user, application=claude)
        .order_by("id")
        .values_list("tool", flat=True)
    )
    assert kept == [f"tool_{n}" for n in range(5, CALLS_KEPT + 5)]
    assert ClientCall.objects.filter(user=user, application=other).count() == CALLS_KEPT
    assert ClientCall.objects.filter(user=other_user).count() == 1


def test_only_the_latest_refusal_of_a_client_is_kept(user: Any) -> None:
    claude = make_application(name="Claude")
    earlier, later = timezone.now() - timedelta(minutes=2), timezone.now()
    keep([], [NotedRefusal(user.pk, claude.pk, earlier, RefusalReason.WRONG_RESOURCE)])
    keep(
        [],
        [
            NotedRefusal(user.pk, claude.pk, earlier, RefusalReason.INACTIVE),
            NotedRefusal(user.pk, claude.pk, later, RefusalReason.EXPIRED),
        ],
    )
    refusal = ClientRefusal.objects.get()
    assert (refusal.refused_at, refusal.reason) == (later, RefusalReason.EXPIRED)


# The session and the user (2), the clients with their tokens' counts and dates (1), their
# last calls (1) and their last refusals (1).
CLIENTS_PAGE_QUERIES = 5


def test_the_clients_page_costs_the_same_queries_for_one_client_or_many(
    mcp_url: str, user: Any
) -> None:
    def queries() -> int:
        browser = Client()
        browser.force_login(user)
        with CaptureQueriesContext(connection) as captured:
            assert browser.get(reverse("dashboard:clients")).status_code == 200
        return len(captured)

    def a_client_that_called(name: str) -> None:
        application = make_application(name=name)
        make_access_token(user, resource=mcp_url, application=application)
        keep([NotedCall(user.pk, application.pk, timezone.now(), "taproot_recall", True)], [])
        ClientRefusal.objects.create(
            user=user, application=application, refused_at=timezone.now(), reason="expired"
        )

    a_client_that_called("One")
    assert queries() == CLIENTS_PAGE_QUERIES
    for n in range(4):
        a_client_that_called(f"More {n}")
    assert queries() == CLIENTS_PAGE_QUERIES


@pytest.mark.skipif(
    not is_postgres(), reason="PostgreSQL's table locks (SQLite waits its busy timeout)"
)
def test_the_write_gives_way_to_a_table_lock_at_once(user: Any) -> None:
    """A restore, a migration or a test's TRUNCATE takes tables whole: the background
    write waits LOCK_WAIT for them, then gives way, never deadlocking with them."""
    claude = make_application(name="Claude")
    noted = [NotedCall(user.pk, claude.pk, timezone.now(), "taproot_status", True)]

    def attempt() -> BaseException | None:
        try:
            keep(noted, [])
        except DatabaseError as error:
            return error
        finally:
            connection.close()
        return None

    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"LOCK TABLE {ClientCall._meta.db_table} IN ACCESS EXCLUSIVE MODE")
        started = time.monotonic()
        with ThreadPoolExecutor(1) as pool:
            error = pool.submit(attempt).result(timeout=30)
        took = time.monotonic() - started
    assert error is not None and is_lock_timeout(error), error
    assert took < 1
    assert not ClientCall.objects.exists()


def test_notes_wait_for_the_next_write_while_the_database_is_busy(
    monkeypatch: pytest.MonkeyPatch, user: Any
) -> None:
    claude = make_application(name="Claude")
    written: list[list[NotedCall]] = []

    def busy(calls: list[NotedCall], refusals: list[NotedRefusal]) -> None:
        raise OperationalError("database is locked")

    def kept(calls: list[NotedCall], refusals: list[NotedRefusal]) -> None:
        written.append(calls)

    activity.note_call(user_id=user.pk, application_id=claude.pk, tool="taproot_recall", ok=True)
    monkeypatch.setattr(activity, "keep", busy)
    anyio.run(activity.write_noted)
    activity.note_call(user_id=user.pk, application_id=claude.pk, tool="taproot_status", ok=False)
    monkeypatch.setattr(activity, "keep", kept)
    anyio.run(activity.write_noted)
    assert [[(c.tool, c.ok) for c in calls] for calls in written] == [
        [("taproot_recall", True), ("taproot_status", False)]
    ]
