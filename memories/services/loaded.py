"""Whether Claude loaded the memory: each reflect tool call is recorded (SPEC §4) as a
load, calls from one client within a minute of each other being one load; status and the
dashboard say when it last happened and how many loads the week saw, and `reflect_due`
says when Claude should load it again (the tools' replies carry a hint then)."""

import enum
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import Count, IntegerField, OuterRef, Subquery, Value
from django.db.models.functions import Coalesce

from memories.conf import reflect_nudge_hours
from memories.models import Closing, ReflectCall, User
from memories.services._common import now_or

# Loads are kept this long: enough to count the last week's and to know the latest (the
# load just recorded is always the latest).
RECENT_REFLECT_DAYS = 7
# Calls from one client this close together are one load: a retry, the same conversation
# calling again, or a client calling in a loop. The later call moves the load's time
# rather than adding a record, so one client leaves at most one record a minute.
COALESCE_WINDOW = timedelta(minutes=1)
# And however many clients call, a user keeps at most this many loads (the newest): the
# week's count is read from at most this many rows, whatever was sent.
MAX_KEPT_LOADS = 1000


class ReflectDue(enum.Enum):
    """Why Claude should load the memory before going on."""

    NEVER_LOADED = "never loaded"  # no reflect yet
    CLOSED_SINCE = "closed since"  # a conversation closed after the last reflect
    STALE = "stale"  # the last reflect is older than TAPROOT_REFLECT_NUDGE_HOURS


def record_reflect(
    *, owner: User, client_id: str = "", client_name: str = "", now: datetime | None = None
) -> None:
    """Note that Claude loaded the memory (a reflect tool call). A call within
    COALESCE_WINDOW of the same client's last one is the same load: its time moves to this
    call. Otherwise a load is added, and those older than a week or beyond the newest
    MAX_KEPT_LOADS are forgotten."""
    now = now_or(now)
    client_id, client_name = client_id[:255], client_name[:255]
    with transaction.atomic():
        same_load = ReflectCall.objects.filter(
            owner=owner, client_id=client_id, called_at__gte=now - COALESCE_WINDOW
        )
        if same_load.filter(called_at__lt=now).update(called_at=now, client_name=client_name):
            return
        if same_load.exists():  # as late as this call already (calls recorded out of order)
            return
        ReflectCall.objects.create(
            owner=owner, called_at=now, client_id=client_id, client_name=client_name
        )
        _forget_old_loads(owner, now)


def _forget_old_loads(owner: User, now: datetime) -> None:
    mine = ReflectCall.objects.filter(owner=owner)
    mine.filter(called_at__lt=now - timedelta(days=RECENT_REFLECT_DAYS)).delete()
    # The newest load past the limit, read from the (owner, called_at) index.
    boundary = mine.order_by("-called_at").values_list("called_at", flat=True)[
        MAX_KEPT_LOADS : MAX_KEPT_LOADS + 1
    ]
    if boundary:
        mine.filter(called_at__lte=boundary[0]).delete()


@dataclass(frozen=True)
class ReflectHistory:
    last_at: datetime | None
    last_client: str
    last_7_days: int


def reflect_history(*, owner: User, now: datetime | None = None) -> ReflectHistory:
    """When Claude last loaded the memory, through which client, and how many loads this
    week (one query, over at most MAX_KEPT_LOADS rows)."""
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


@dataclass(frozen=True)
class LastLoads:
    """When the owner last loaded the memory and last closed a conversation (None: never).
    Read with the bearer token on /mcp (mcp_bridge.auth), so a tool call need not ask."""

    last_reflect: datetime | None
    last_close: datetime | None


def last_loads(owner: User) -> LastLoads:
    """The owner's latest reflect and latest close, read together (one query)."""
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
    return LastLoads(*last) if last else LastLoads(None, None)


def reflect_due(
    *, owner: User, now: datetime | None = None, known: LastLoads | None = None
) -> ReflectDue | None:
    """Whether a reflect is due, and why (None when it is not): before the first reflect,
    after a closing newer than the last reflect, and once the last reflect is
    TAPROOT_REFLECT_NUDGE_HOURS old. `known`: the owner's last loads as already read in
    this request; one query when not given."""
    now = now_or(now)
    last = known if known is not None else last_loads(owner)
    if last.last_reflect is None:
        return ReflectDue.NEVER_LOADED
    if last.last_close is not None and last.last_close > last.last_reflect:
        return ReflectDue.CLOSED_SINCE
    if now - last.last_reflect > timedelta(hours=reflect_nudge_hours()):
        return ReflectDue.STALE
    return None
