"""Suggested promotions, demotions and archiving, read from the recall history already
stored. Never applied by themselves: the status tool and the dashboard list them, a person
applies one (through the same services as the tools' promote and archive) or
dismisses it for good."""

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import Count, IntegerField, Subquery, Value
from django.db.models.functions import Coalesce

from memories.errors import SuggestionStale
from memories.models import (
    ChangeSource,
    DismissedSuggestion,
    Memory,
    MemoryQuerySet,
    SuggestionKind,
    User,
)
from memories.services._common import get_memory, now_or
from memories.services.curation import archive, promote
from memories.shortids import short_ids
from memories.vocabulary import (
    ARCHIVE,
    ARCHIVE_IDLE_DAYS,
    DEMOTE,
    DEMOTE_IDLE_DAYS,
    PROMOTE,
    PROMOTE_MIN_RECALLS,
    PROMOTE_RECALLED_WITHIN_DAYS,
    SUGGESTION_KINDS,
)

REASONS = {
    PROMOTE: (
        f"recalled at least {PROMOTE_MIN_RECALLS} times, the last time within "
        f"{PROMOTE_RECALLED_WITHIN_DAYS} days: worth loading in full at every start"
    ),
    DEMOTE: (
        f"core, but neither recalled nor updated for {DEMOTE_IDLE_DAYS} days: it may not need "
        "loading in full at every start"
    ),
    ARCHIVE: (
        f"low salience, never recalled and not updated for {ARCHIVE_IDLE_DAYS} days: "
        "archiving hides it and keeps it"
    ),
}
# The status tool names this many memories of each kind (and counts them all).
STATUS_SAMPLE = 5
ARCHIVE_REASON = f"Suggested: low salience, never recalled, idle for {ARCHIVE_IDLE_DAYS} days."


@dataclass(frozen=True)
class Suggested:
    id: uuid.UUID
    short_id: str
    gist: str


@dataclass(frozen=True)
class SuggestionGroup:
    kind: str
    reason: str
    count: int  # every memory the rule picks, beyond those listed
    memories: list[Suggested]

    def as_status(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "count": self.count,
            "ids": [m.short_id for m in self.memories],
            "reason": self.reason,
        }


def _picked(owner: User, kind: str, now: datetime) -> MemoryQuerySet:
    """Every memory a rule picks, dismissed or not, unordered."""
    mine = Memory.objects.for_owner(owner)
    if kind == PROMOTE:
        return mine.promotion_candidates(now)
    if kind == DEMOTE:
        return mine.demotion_candidates(now)
    return mine.archive_candidates(now)


def _order(kind: str) -> tuple[str, ...]:
    """The order a rule's memories are listed in: the most recalled first for promotion,
    the longest idle first otherwise."""
    if kind == PROMOTE:
        return ("-retrieval_count", "-last_retrieved", "id")
    return ("last_touched_at", "id")


def _candidates(owner: User, kind: str, now: datetime) -> MemoryQuerySet:
    """The memories a rule picks, not dismissed, in the order they are listed."""
    return _picked(owner, kind, now).order_by(*_order(kind)).not_dismissed(kind)


def _count(rows: MemoryQuerySet) -> Coalesce:
    """How many rows, as a value of the query it is put in (0 for none)."""
    counted = rows.order_by().values("owner").annotate(n=Count("pk")).values("n")
    return Coalesce(Subquery(counted), Value(0), output_field=IntegerField())


def _listed(owner: User, kind: str, now: datetime, limit: int) -> list[tuple[uuid.UUID, str, int]]:
    """The first `limit` memories the rule picks that were not dismissed, in its order
    (id, gist), each with how many it picks that were not dismissed. They are chosen in the
    rule's index alone (memory_live_*_order) and only they are read from the table; the
    count is all the rule picks, counted in that index alone, less those it picks among
    the owner's dismissals of that kind (a person's few): never a row of the table read
    per memory the rule picks."""
    picked = _picked(owner, kind, now)
    order = _order(kind)
    dismissed = DismissedSuggestion.objects.filter(owner=owner, kind=kind).values("memory_id")
    chosen = picked.order_by(*order).not_dismissed(kind).values("id")[:limit]
    return list(
        Memory.objects.filter(pk__in=chosen)
        .order_by(*order)
        .annotate(total=_count(picked) - _count(picked.filter(pk__in=dismissed)))
        .values_list("id", "gist", "total")
    )


def suggestions(
    *, owner: User, now: datetime | None = None, limit: int = STATUS_SAMPLE
) -> list[SuggestionGroup]:
    """Each kind's count and its first `limit` memories: one query per kind (the count a
    value of it), and one for the short ids of them all."""
    now = now_or(now)
    rows = {kind: _listed(owner, kind, now, limit) for kind in SUGGESTION_KINDS}
    shown_ids = short_ids(owner, (pk for found in rows.values() for pk, _, _ in found))
    return [
        SuggestionGroup(
            kind=kind,
            reason=REASONS[kind],
            # None listed: none not dismissed, so none to count.
            count=found[0][2] if found else 0,
            memories=[Suggested(pk, shown_ids[pk], gist) for pk, gist, _ in found],
        )
        for kind, found in rows.items()
    ]


def apply_suggestion(
    *,
    owner: User,
    memory_id: uuid.UUID,
    kind: SuggestionKind,
    source: ChangeSource = ChangeSource.DASHBOARD,
    now: datetime | None = None,
) -> Memory:
    """Do what a suggestion says, through the service a tool would use for it, while it
    still stands: with the memory locked, inside that service's transaction, the rule must
    still pick it and the suggestion must not have been dismissed (SuggestionStale, and
    nothing changes, otherwise). The URL of a suggestion is no proof that it was made."""
    moment = now_or(now)

    def still_suggested(memory: Memory) -> None:
        if _candidates(owner, kind, moment).filter(pk=memory.pk).exists():
            return
        dismissed = DismissedSuggestion.objects.filter(memory=memory, kind=kind).exists()
        raise SuggestionStale(memory.pk, kind, dismissed=dismissed)

    if kind == SuggestionKind.PROMOTE:
        return promote(
            owner=owner,
            memory_id=memory_id,
            core=True,
            source=source,
            now=moment,
            require=still_suggested,
        )
    if kind == SuggestionKind.DEMOTE:
        return promote(
            owner=owner,
            memory_id=memory_id,
            core=False,
            source=source,
            now=moment,
            require=still_suggested,
        )
    return archive(
        owner=owner,
        memory_id=memory_id,
        reason=ARCHIVE_REASON,
        source=source,
        now=moment,
        require=still_suggested,
    ).memory


def dismiss_suggestion(
    *, owner: User, memory_id: uuid.UUID, kind: SuggestionKind, now: datetime | None = None
) -> bool:
    """Turn a suggestion down: the rule will not pick this memory for it again. Whether it
    was not dismissed already. The memory is locked as applying a suggestion locks it, so
    an apply and a dismissal of it never overlap."""
    with transaction.atomic():
        memory = get_memory(owner, memory_id, for_update=True)
        _, created = DismissedSuggestion.objects.get_or_create(
            memory=memory, kind=kind, defaults={"owner": owner, "dismissed_at": now_or(now)}
        )
    return created
