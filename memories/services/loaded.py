"""Whether Claude loaded the memory: each reflect tool call is recorded (SPEC §4), status
and the dashboard say when it last happened, and `reflect_due` says when Claude should
load it again (the tools' replies carry a hint then)."""

import enum
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import Count, IntegerField, OuterRef, Subquery, Value
from django.db.models.functions import Coalesce

from memories.conf import reflect_nudge_hours
from memories.models import Closing, ReflectCall, User
from memories.services._common import now_or

# Calls are kept this long: enough to count the last week's and to know the latest (the
# call just recorded is always the latest).
RECENT_REFLECT_DAYS = 7


class ReflectDue(enum.Enum):
    """Why Claude should load the memory before going on."""

    NEVER_LOADED = "never loaded"  # no reflect yet
    CLOSED_SINCE = "closed since"  # a conversation closed after the last reflect
    STALE = "stale"  # the last reflect is older than TAPROOT_REFLECT_NUDGE_HOURS


def record_reflect(
    *, owner: User, client_id: str = "", client_name: str = "", now: datetime | None = None
) -> None:
    """Note that Claude loaded the memory (a reflect tool call), and forget calls older than
    a week."""
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


def reflect_due(*, owner: User, now: datetime | None = None) -> ReflectDue | None:
    """Whether a reflect is due, and why (None when it is not): before the first reflect,
    after a closing newer than the last reflect, and once the last reflect is
    TAPROOT_REFLECT_NUDGE_HOURS old. One query."""
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
        return ReflectDue.NEVER_LOADED
    if last_close is not None and last_close > last_reflect:
        return ReflectDue.CLOSED_SINCE
    if now - last_reflect > timedelta(hours=reflect_nudge_hours()):
        return ReflectDue.STALE
    return None
