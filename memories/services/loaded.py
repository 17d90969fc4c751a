"""Whether Claude loaded the memory: each taproot_reflect tool call is recorded (SPEC §4),
status and the dashboard say when it last happened, and remember and recall replies
carry a `reflect_hint` while a reflect is due."""

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.models import Count, IntegerField, OuterRef, Subquery, Value
from django.db.models.functions import Coalesce

from memories.conf import reflect_nudge_hours
from memories.models import Closing, ReflectCall, User
from memories.services._common import now_or

# Calls are kept this long: enough to count the last week's and to know the latest (the
# call just recorded is always the latest).
RECENT_REFLECT_DAYS = 7
NEVER_LOADED_HINT = (
    "Call taproot_reflect before going on: your memory of this user has not been loaded yet."
)
CLOSED_SINCE_HINT = (
    "Call taproot_reflect before going on: a conversation has closed since your memory was "
    "last loaded, so this one has not loaded it."
)
STALE_HINT = (
    "Call taproot_reflect before going on: your memory was last loaded more than {hours} "
    "hours ago, probably in another conversation."
)


def record_reflect(
    *, owner: User, client_id: str = "", client_name: str = "", now: datetime | None = None
) -> None:
    """Note a taproot_reflect tool call, and forget calls older than a week."""
    now = now_or(now)
    with transaction.atomic():
        ReflectCall.objects.create(
            owner=owner,
            called_at=now,
            client_id=client_id[:255],
            client_name=client_name[:255],
        )
        ReflectCall.objects.filter(
            owner=owner, called_at__lt=now - timedelta(days=RECENT_REFLECT_DAYS)
        ).delete()


@dataclass(frozen=True)
class ReflectHistory:
    last_at: datetime | None
    last_client: str
    last_7_days: int


def reflect_history(*, owner: User, now: datetime | None = None) -> ReflectHistory:
    """When Claude last loaded the memory, through which client, and how often this week
    (one query)."""
    now = now_or(now)
    calls = ReflectCall.objects.filter(owner=OuterRef("pk"))
    latest = calls.order_by("-called_at", "-id")
    recent = (
        calls.filter(called_at__gte=now - timedelta(days=RECENT_REFLECT_DAYS))
        .order_by()
        .values("owner")
        .annotate(n=Count("pk"))
        .values("n")
    )
    row = (
        User.objects.filter(pk=owner.pk)
        .annotate(
            last_at=Subquery(latest.values("called_at")[:1]),
            last_client=Subquery(latest.values("client_name")[:1]),
            recent=Coalesce(Subquery(recent, output_field=IntegerField()), Value(0)),
        )
        .values_list("last_at", "last_client", "recent")
        .first()
    )
    last_at, last_client, recent_calls = row if row else (None, None, 0)
    return ReflectHistory(last_at=last_at, last_client=last_client or "", last_7_days=recent_calls)


def reflect_hint(*, owner: User, now: datetime | None = None) -> str | None:
    """The nudge to send with a remember or recall reply, or None when no reflect is due:
    it is due before the first reflect, after a taproot_close newer than the last reflect,
    and once the last reflect is TAPROOT_REFLECT_NUDGE_HOURS old."""
    now = now_or(now)
    last = (
        User.objects.filter(pk=owner.pk)
        .annotate(
            last_reflect=Subquery(
                ReflectCall.objects.filter(owner=OuterRef("pk"))
                .order_by("-called_at")
                .values("called_at")[:1]
            ),
            last_close=Subquery(
                Closing.objects.filter(owner=OuterRef("pk"))
                .order_by("-created_at")
                .values("created_at")[:1]
            ),
        )
        .values_list("last_reflect", "last_close")
        .first()
    )
    last_reflect, last_close = last if last else (None, None)
    if last_reflect is None:
        return NEVER_LOADED_HINT
    if last_close is not None and last_close > last_reflect:
        return CLOSED_SINCE_HINT
    hours = reflect_nudge_hours()
    if now - last_reflect > timedelta(hours=hours):
        return STALE_HINT.format(hours=hours)
    return None


def with_reflect_hint(reply: dict[str, Any], owner: User, *, now: datetime) -> dict[str, Any]:
    """A tool reply with its `reflect_hint` when a reflect is due."""
    if hint := reflect_hint(owner=owner, now=now):
        reply["reflect_hint"] = hint
    return reply
