"""Gather what the reflect payload shows and build it (SPEC §5, §8)."""

from collections import Counter
from datetime import datetime
from typing import Any

from memories.conf import catalog_window_days, reflect_max_tokens
from memories.models import Closing, Memory, User
from memories.payload import (
    CatalogEntry,
    ClosingEntry,
    CoreEntry,
    ReflectPayload,
    build_reflect_payload,
    max_catalog_lines,
)
from memories.services._common import now_or
from memories.vocabulary import CATEGORY_ORDER, home_category

RECENT_CLOSINGS = 3


def reflect(*, owner: User, now: datetime | None = None) -> ReflectPayload:
    """The start-of-conversation payload for this owner. Reads only.

    Three queries whatever the store's size: core memories in full, catalog lines (gist
    only) plus per-category counts of what the window leaves out, and recent closings.
    """
    now = now_or(now)
    window_days = catalog_window_days()
    live = Memory.objects.for_owner(owner).live()
    core = [
        CoreEntry(
            id=str(pk),
            category=category,
            salience=salience,
            content=content,
            updated_at=updated_at,
            linked_memories=_string_list(links),
        )
        for pk, category, salience, content, updated_at, links in live.core().values_list(
            "id", "category", "salience", "content", "updated_at", "linked_memories"
        )
    ]
    non_core = live.non_core()
    # Only lines that could fit the budget are read: the rest are cut whatever happens,
    # so they are only counted. This keeps the cost flat however large the store grows.
    max_tokens = reflect_max_tokens()
    bound = max_catalog_lines(max_tokens)
    catalog = [
        CatalogEntry(id=str(pk), category=category, salience=salience, gist=gist, last_touch=touch)
        for pk, category, salience, gist, touch in Memory.objects.filter(
            # Choose the lines in the index alone, then read the chosen ones.
            pk__in=non_core.in_catalog_window(now, window_days)
            .in_catalog_order()
            .values("id")[:bound]
        ).values_list("id", "category", "salience", "gist", "last_touched_at")
    ]
    omitted: dict[str, int] = {}
    unlisted: dict[str, int] = {}
    read = Counter(entry.category for entry in catalog)
    for category, (inside, outside) in non_core.catalog_window_counts(now, window_days).items():
        omitted[category] = outside
        unlisted[category] = inside - read[category]
    closings = [
        ClosingEntry(
            id=str(pk), reflection=reflection, created_at=created_at, conversation_title=title
        )
        for pk, reflection, created_at, title in Closing.objects.for_owner(owner)
        .newest_first()
        .values_list("id", "reflection", "created_at", "conversation_title")[:RECENT_CLOSINGS]
    ]
    return build_reflect_payload(
        core=core,
        catalog=catalog,
        omitted=omitted,
        closings=closings,
        window_days=window_days,
        max_tokens=max_tokens,
        unlisted=unlisted,
    )


def _string_list(value: Any) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else []


def status(*, owner: User, now: datetime | None = None) -> dict[str, Any]:
    """Counts and the payload's size, measured on exactly what reflect would send now."""
    now = now_or(now)
    payload = reflect(owner=owner, now=now)
    memories = Memory.objects.for_owner(owner)
    totals = memories.state_counts()
    live_by_category = {c: 0 for c in CATEGORY_ORDER}
    for category, count in memories.live().category_counts().items():
        live_by_category[home_category(category)] += count
    omitted = sum(payload.payload["catalog_omitted"].values())
    cut = payload.cut_count
    return {
        "status": "ok",
        "live_memories": totals["live"],
        "live_by_category": live_by_category,
        "archived": totals["archived"],
        "closings": Closing.objects.for_owner(owner).count(),
        "core_count": payload.payload["core_count"],
        "catalog": {
            "included": payload.payload["catalog_count"],
            "omitted": omitted,
            "omitted_by_window": omitted - cut,
            "cut_by_budget": cut,
            "window_days": catalog_window_days(),
        },
        "reflect_payload": {
            "bytes": payload.bytes,
            "kb": payload.kilobytes,
            "tokens": payload.tokens,
            "max_tokens": payload.max_tokens,
            "core_tokens": payload.core_tokens,
            "core_share_of_budget": round(payload.core_tokens / payload.max_tokens, 3),
        },
        "warnings": payload.warnings,
    }
