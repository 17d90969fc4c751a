"""What each client last did for a user at /mcp, for the clients page: its last calls
(time, tool, ok or error) and the last refusal of its token, with the reason.

Claude.ai's failures are otherwise invisible to the person: a connector whose token
expired loses its tools without a word. Kept bounded (the last CALLS_KEPT calls per user
and client, one refusal), owner-only, and without arguments, replies or token material.
"""

import logging
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import DatabaseError
from django.db.models import Subquery
from django.utils import timezone

from oauth.models import ClientCall, ClientRefusal, RefusalReason

logger = logging.getLogger("taproot.mcp")

# The calls kept per user and client: what the clients page lists.
CALLS_KEPT = 20
# A client refused again and again (a connector retrying an expired token) is written
# down at most this often per user, client and reason by one process.
REFUSAL_NOTE_SECONDS = 60.0


def note_call(*, user_id: int, application_id: int | None, tool: str, ok: bool) -> None:
    """Keep one call, and let the oldest beyond CALLS_KEPT go. Runs on the call's own
    database thread, after the tool's work; a failure here never fails the call."""
    if application_id is None:
        return
    try:
        ClientCall.objects.create(
            user_id=user_id,
            application_id=application_id,
            called_at=timezone.now(),
            tool=tool,
            ok=ok,
        )
        theirs = ClientCall.objects.filter(user_id=user_id, application_id=application_id)
        oldest_kept = theirs.order_by("-id").values("id")[CALLS_KEPT - 1 : CALLS_KEPT]
        theirs.filter(id__lt=Subquery(oldest_kept)).delete()
    except DatabaseError:
        logger.warning("could not note a %s call for the clients page", tool, exc_info=True)


_refusals_noted: dict[tuple[int, int, str], float] = {}
_refusals_lock = threading.Lock()


def note_refusal(*, user_id: int, application_id: int | None, reason: RefusalReason) -> None:
    """Keep the last refusal of this client's token for this user (once a minute at most
    for the same reason)."""
    if application_id is None:
        return
    key, moment = (user_id, application_id, reason.value), time.monotonic()
    with _refusals_lock:
        if moment - _refusals_noted.get(key, -REFUSAL_NOTE_SECONDS) < REFUSAL_NOTE_SECONDS:
            return
        if len(_refusals_noted) > 10_000:
            _refusals_noted.clear()
        _refusals_noted[key] = moment
    try:
        ClientRefusal.objects.update_or_create(
            user_id=user_id,
            application_id=application_id,
            defaults={"refused_at": timezone.now(), "reason": reason},
        )
    except DatabaseError:
        logger.warning("could not note a refusal for the clients page", exc_info=True)


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
