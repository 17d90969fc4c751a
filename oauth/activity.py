"""What each client last did for a user at /mcp, for the clients page: its last calls
(time, tool, ok or error) and the last refusal of its token, with the reason.

Claude.ai's failures are otherwise invisible to the person: a connector whose token
expired loses its tools without a word. Kept bounded (the last CALLS_KEPT calls per user
and client, one refusal), owner-only, and without arguments, replies or token material.
A refusal is kept only when the token still names its owner (expired, deactivated,
issued for another address): a revoked or unknown token names nobody to show it to.
"""

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.contrib.auth import get_user_model
from django.db import connection, transaction
from django.db.models import Subquery
from oauth2_provider.models import get_application_model

from oauth.models import ClientCall, ClientRefusal, RefusalReason

# The calls kept per user and client: what the clients page lists.
CALLS_KEPT = 20
# On PostgreSQL, how long the write waits for a lock before it gives way (the notes wait
# for the next write): it must never hold up what takes a table whole, a restore, a
# migration, a test's TRUNCATE, nor deadlock with it.
LOCK_WAIT = "100ms"


@dataclass(frozen=True)
class NotedCall:
    user_id: int
    application_id: int
    at: datetime
    tool: str
    ok: bool


@dataclass(frozen=True)
class NotedRefusal:
    user_id: int
    application_id: int
    at: datetime
    reason: RefusalReason


def keep(calls: Sequence[NotedCall], refusals: Sequence[NotedRefusal]) -> None:
    """Write calls and refusals noted since the last time (mcp_bridge.activity gathers
    them off the requests' path): each client's calls beyond the last CALLS_KEPT go, and
    only its latest refusal stays."""
    with transaction.atomic():
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute(f"SET LOCAL lock_timeout = '{LOCK_WAIT}'")
        # An account or client deleted since (cleanup_oauth_clients, a deleted account)
        # leaves nothing to keep.
        noted: list[NotedCall | NotedRefusal] = [*calls, *refusals]
        users = set(
            get_user_model()
            .objects.filter(pk__in={n.user_id for n in noted})
            .values_list("pk", flat=True)
        )
        clients = set(
            get_application_model()
            .objects.filter(pk__in={n.application_id for n in noted})
            .values_list("pk", flat=True)
        )
        by_client: dict[tuple[int, int], list[NotedCall]] = defaultdict(list)
        for call in calls:
            if call.user_id in users and call.application_id in clients:
                by_client[call.user_id, call.application_id].append(call)
        refusals = [r for r in refusals if r.user_id in users and r.application_id in clients]
        ClientCall.objects.bulk_create(
            ClientCall(
                user_id=call.user_id,
                application_id=call.application_id,
                called_at=call.at,
                tool=call.tool,
                ok=call.ok,
            )
            for theirs in by_client.values()
            for call in theirs[-CALLS_KEPT:]
        )
        for user_id, application_id in by_client:
            theirs = ClientCall.objects.filter(user_id=user_id, application_id=application_id)
            oldest_kept = theirs.order_by("-id").values("id")[CALLS_KEPT - 1 : CALLS_KEPT]
            theirs.filter(id__lt=Subquery(oldest_kept)).delete()
        latest = {(r.user_id, r.application_id): r for r in refusals}
        for (user_id, application_id), refusal in latest.items():
            ClientRefusal.objects.update_or_create(
                user_id=user_id,
                application_id=application_id,
                defaults={"refused_at": refusal.at, "reason": refusal.reason},
            )


@dataclass(frozen=True)
class Call:
    at: datetime
    tool: str
    ok: bool


@dataclass(frozen=True)
class Refusal:
    at: datetime
    reason: str  # in words

    @classmethod
    def of(cls, refusal: ClientRefusal) -> "Refusal":
        return cls(refusal.refused_at, RefusalReason(refusal.reason).label)


@dataclass(frozen=True)
class Activity:
    calls: list[Call]  # the most recent first
    refusal: Refusal | None


def activity(user: Any, application_ids: Iterable[int]) -> dict[int, Activity]:
    """Each of these clients' last calls and last refusal for this user: two queries,
    however many clients."""
    ids = list(application_ids)
    calls: dict[int, list[Call]] = {pk: [] for pk in ids}
    for application_id, at, tool, ok in (
        ClientCall.objects.filter(user=user, application_id__in=ids)
        .order_by("application_id", "-id")
        .values_list("application_id", "called_at", "tool", "ok")
    ):
        if len(calls[application_id]) < CALLS_KEPT:
            calls[application_id].append(Call(at, tool, ok))
    refusals = {
        refusal.application_id: Refusal.of(refusal)
        for refusal in ClientRefusal.objects.filter(user=user, application_id__in=ids)
    }
    return {pk: Activity(calls[pk], refusals.get(pk)) for pk in ids}
