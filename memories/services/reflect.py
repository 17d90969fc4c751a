"""Gather what the reflect payload shows and build it (SPEC §5, §8)."""

import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Count, Q
from django.db.models.functions import Length

from memories.conf import catalog_window_days, meaning_model, reflect_max_tokens
from memories.models import Closing, Memory, MemoryQuerySet, Salience, StoreCount, User
from memories.payload import build_reflect_payload, catalog_read_room
from memories.payload_entries import (
    CatalogEntry,
    ClosingEntry,
    CoreEntry,
    ReflectPayload,
    core_chars,
    core_content_fits,
    could_fit,
    line_chars,
)
from memories.services._common import now_or
from memories.services.loaded import ReflectHistory, reflect_history
from memories.services.suggestions import SuggestionGroup, suggestions
from memories.shortids import short_ids
from memories.vocabulary import CATEGORY_ORDER, SHORT_ID_MIN, home_category, salience_rank

RECENT_CLOSINGS = 3


@dataclass(frozen=True)
class _Gathered:
    payload: ReflectPayload
    # Per stored category: (core, non-core the window admits, non-core it leaves out).
    tier_counts: dict[str, tuple[int, int, int]]


@dataclass(frozen=True)
class _Kept:
    """What the kept counts say of a store: its tier counts, and the saliences (as
    stored) its live core and non-core memories hold."""

    tier_counts: dict[str, tuple[int, int, int]]
    core_saliences: frozenset[str]
    non_core_saliences: frozenset[str]


def reflect(*, owner: User, now: datetime | None = None) -> ReflectPayload:
    """The start-of-conversation payload for this owner. Reads only (the tool records the
    call itself, with memories.services.record_reflect)."""
    return _gather(owner, now_or(now)).payload


# The first page of memories read in core or catalog order; each next one is twice as
# long. A payload of the default budget shows a hundred to two hundred lines.
FIRST_PAGE = 32


def _gather(owner: User, now: datetime) -> _Gathered:
    """A few queries, whatever the store's size: counts per category and tier (the kept
    counts, and those touched within the window), the core memories that could be shown
    (their text only for those that could fit in full), the recent closings, the catalog
    lines that could fit, and the short ids shown. Core memories and catalog lines are
    read in their order, a page at a time, and only while what was read could still fit
    the budget (`could_fit`): nothing is read that the budget rules out before it is
    read, so what reflect reads follows what it can show, not the store."""
    window_days = catalog_window_days()
    max_tokens = reflect_max_tokens()
    room = max_tokens * 4
    live = Memory.objects.for_owner(owner).live()
    kept = _kept(owner, now, window_days)
    tier_counts = kept.tier_counts

    core_rows = list(
        could_fit(
            _in_order(
                live.core(),
                kept.core_saliences,
                (
                    "id",
                    "category",
                    "salience",
                    "gist",
                    "updated_at",
                    "last_touched_at",
                    "linked_memories",
                    Length("content"),
                ),
            ),
            lambda row: core_chars(row[-1], row[3]),
            room,
        )
    )
    n_full = core_content_fits((row[-1] for row in core_rows), max_tokens)
    full_ids = [row[0] for row in core_rows[:n_full]]
    contents = dict(Memory.objects.filter(pk__in=full_ids).values_list("id", "content"))
    core = [
        CoreEntry(
            id=str(pk),
            category=category,
            salience=salience,
            gist=gist,
            updated_at=updated_at,
            last_touch=touched,
            content=contents.get(pk),
            linked_memories=_string_list(links),
        )
        for pk, category, salience, gist, updated_at, touched, links, _ in core_rows
    ]
    core_total = sum(core for core, _, _ in tier_counts.values())
    closings = [
        ClosingEntry(
            id=str(pk), reflection=reflection, created_at=created_at, conversation_title=title
        )
        for pk, reflection, created_at, title in Closing.objects.for_owner(owner)
        .newest_first()
        .values_list("id", "reflection", "created_at", "conversation_title")[:RECENT_CLOSINGS]
    ]

    inside = sum(i for _, i, _ in tier_counts.values())
    lines_room = (
        catalog_read_room(
            max_tokens=max_tokens,
            core=[(row[-1], row[3]) for row in core_rows],
            n_full=n_full,
            closings=[c.reflection for c in closings],
        )
        if inside
        else 0
    )
    catalog_rows = list(
        could_fit(
            _in_order(
                live.non_core(),
                kept.non_core_saliences,
                ("id", "category", "salience", "gist", "last_touched_at"),
                window=(now, window_days),
            ),
            lambda row: line_chars(row[3]),
            lines_room,
        )
    )
    catalog = [
        CatalogEntry(id=str(pk), category=category, salience=salience, gist=gist, last_touch=touch)
        for pk, category, salience, gist, touch in catalog_rows
    ]
    omitted: dict[str, int] = {}
    unlisted: dict[str, int] = {}
    read: dict[str, int] = {}
    for entry in catalog:
        read[entry.category] = read.get(entry.category, 0) + 1
    for category, (_, admitted, left_out) in tier_counts.items():
        omitted[category] = left_out
        unlisted[category] = admitted - read.get(category, 0)

    def build(shown: dict[str, str]) -> ReflectPayload:
        return build_reflect_payload(
            core=core,
            catalog=catalog,
            omitted=omitted,
            closings=closings,
            window_days=window_days,
            max_tokens=max_tokens,
            unlisted=unlisted,
            core_unlisted=core_total - len(core),
            shown_ids=shown,
        )

    # Built first with every id at its shortest; only ids that turn out to need more
    # characters build it again. Longer ids take more room, so the second build shows
    # none that the first did not.
    as_uuid = {str(row[0]): row[0] for row in [*core_rows, *catalog_rows]}
    for core_entry in core:
        for link in core_entry.linked_memories:
            if link not in as_uuid and (parsed := _as_uuid(link)) is not None:
                as_uuid[link] = parsed
    shortest = {shown_id: str(pk)[:SHORT_ID_MIN] for shown_id, pk in as_uuid.items()}
    payload = build(shortest)
    shown = {as_uuid[i] for i in payload.ids_shown() if i in as_uuid}
    found = short_ids(owner, shown)
    longer = {i: found[pk] for i, pk in as_uuid.items() if pk in found and found[pk] != shortest[i]}
    if longer:
        payload = build({**shortest, **longer})
    return _Gathered(payload=payload, tier_counts=tier_counts)


def _in_order(
    rows: MemoryQuerySet,
    saliences: Iterable[str],
    fields: tuple[Any, ...],
    *,
    window: tuple[datetime, int | None] | None = None,
) -> Iterator[tuple[Any, ...]]:
    """These memories' `fields` (the id first, the last touch among them), in core and
    catalog order (salience high to low, last touch newest first, then id), read lazily a
    page at a time: one salience rank after another, each in the tiers' order index
    (memory_live_tier_order), each page from where the last one ended, so a page costs
    what it holds, however many memories come after it. `saliences`: those the memories
    hold (from the kept counts). With a `window` (now, days), only what the catalog
    window admits. Each page is a statement of its own: a memory a write moves between
    two of them is yielded once at most, and none is skipped but one moved before the
    page (as if read a moment later)."""
    touch = fields.index("last_touched_at")
    seen: set[Any] = set()
    ranks: dict[int, list[str]] = {}
    for salience in sorted(saliences):
        ranks.setdefault(salience_rank(salience), []).append(salience)
    for rank in sorted(ranks):
        picked = rows.filter(salience__in=ranks[rank])
        if window is not None and window[1] is not None and ranks[rank] != [Salience.HIGH]:
            picked = picked.touched_lately(window[0], window[1])
        ordered = picked.order_by("-last_touched_at", "id").values_list(*fields)
        page_rows, size = ordered, FIRST_PAGE
        while True:
            page = list(page_rows[:size])
            for row in page:
                if row[0] not in seen:
                    seen.add(row[0])
                    yield row
            if len(page) < size:
                break
            touched, pk = page[-1][touch], page[-1][0]
            page_rows = ordered.filter(last_touched_at__lte=touched).filter(
                Q(last_touched_at__lt=touched) | Q(pk__gt=pk)
            )
            size *= 2


def _kept(owner: User, now: datetime, window_days: int | None) -> _Kept:
    """Per stored category: (core memories, non-core memories the catalog window admits,
    non-core memories it leaves out), as Memory.objects.tier_counts counts them, from
    the kept counts and, when a window is set, the non-core memories below high
    salience touched within it: that count reads only their entries of the tiers index
    (each category and salience the kept counts name, from the window's start), however
    large the store. Without a window every non-core memory is admitted. And the
    saliences the live core and non-core memories hold."""
    counts: dict[str, tuple[int, int, int]] = {}
    below_high: set[tuple[str, str]] = set()
    core_saliences: set[str] = set()
    non_core_saliences: set[str] = set()
    for category, core, salience, n in (
        StoreCount.objects.for_owner(owner)
        .filter(archived=False)
        .values_list("category", "core", "salience", "n")
    ):
        core_n, admitted, left_out = counts.get(category, (0, 0, 0))
        if core:
            core_n += n
            core_saliences.add(salience)
        else:
            non_core_saliences.add(salience)
            if salience == Salience.HIGH or window_days is None:
                admitted += n
            else:
                left_out += n
                below_high.add((category, salience))
        counts[category] = (core_n, admitted, left_out)
    if below_high and window_days is not None:
        lately = (
            Memory.objects.for_owner(owner)
            .live()
            .non_core()
            .filter(
                category__in=sorted({c for c, _ in below_high}),
                salience__in=sorted({s for _, s in below_high}),
            )
            .touched_lately(now, window_days)
            .order_by()
            .values_list("category")
            .annotate(n=Count("pk"))
        )
        for category, n in lately:
            core_n, admitted, left_out = counts[category]
            counts[category] = (core_n, admitted + n, left_out - n)
    return _Kept(counts, frozenset(core_saliences), frozenset(non_core_saliences))


def _as_uuid(value: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(value)
    except ValueError:
        return None


def _string_list(value: Any) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else []


@dataclass(frozen=True)
class StoreStatus:
    """How a store looks (SPEC §8): live memories by category (every category, canonical
    names), the archived and closing counts, the payload reflect would send now, the
    catalog window, when Claude last loaded the memory, and the suggestions."""

    live_by_category: dict[str, int]
    archived: int
    closings: int
    payload: ReflectPayload
    window_days: int | None
    history: ReflectHistory
    suggestions: list[SuggestionGroup]
    # The embedder recall by meaning uses, in words; None when recall ranks by words alone.
    meaning_model: str | None = None

    @property
    def live(self) -> int:
        return sum(self.live_by_category.values())

    @property
    def catalog_omitted(self) -> int:
        """Non-core live memories the catalog leaves out, by the window or the budget."""
        return sum(self.payload.payload.get("catalog_omitted", {}).values())


def status(*, owner: User, now: datetime | None = None) -> StoreStatus:
    """Counts, the payload measured on exactly what reflect would send now, when Claude
    last loaded it, and the suggested promotions, demotions and archiving."""
    now = now_or(now)
    gathered = _gather(owner, now)
    live_by_category = dict.fromkeys(CATEGORY_ORDER, 0)
    for category, counts in gathered.tier_counts.items():
        live_by_category[home_category(category)] += sum(counts)
    return StoreStatus(
        live_by_category=live_by_category,
        archived=sum(
            StoreCount.objects.for_owner(owner).filter(archived=True).values_list("n", flat=True)
        ),
        closings=Closing.objects.for_owner(owner).count(),
        payload=gathered.payload,
        window_days=catalog_window_days(),
        history=reflect_history(owner=owner, now=now),
        suggestions=suggestions(owner=owner, now=now),
        meaning_model=meaning_model(),
    )
