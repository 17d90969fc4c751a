"""The reflect payload (SPEC §5) as a pure function over plain values.

`taproot_reflect`, `taproot_status` and the dashboard preview all call
`build_reflect_payload`, so what people see is exactly what Claude loads.
"""

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from memories.jsonutil import dumps
from memories.timeutil import day, isoformat, micros
from memories.vocabulary import CATEGORY_ORDER, home_category, salience_rank

USAGE_NOTE = (
    "Two tiers. core_memories are loaded in full every time: who you are, who you are "
    "talking to, standing corrections and live threads. catalog holds one line per other "
    "recent or important memory: [id] [category] [salience] [last touched] gist. When a "
    "line looks relevant, load its full text with taproot_recall(ids=[...]); search "
    "everything, including what the catalog leaves out, with taproot_recall(query=...) or "
    "taproot_recall(category=...)."
)


@dataclass(frozen=True)
class CoreEntry:
    id: str
    category: str
    salience: str
    content: str
    updated_at: datetime
    linked_memories: Sequence[str] = ()

    def slim(self) -> dict[str, Any]:
        item: dict[str, Any] = {
            "id": self.id,
            "category": self.category,
            "salience": self.salience,
            "content": self.content,
            "updated_at": isoformat(self.updated_at),
        }
        if self.linked_memories:
            item["linked_memories"] = list(self.linked_memories)
        return item


@dataclass(frozen=True)
class CatalogEntry:
    id: str
    category: str
    salience: str
    gist: str
    last_touch: datetime

    def line(self) -> str:
        gist = " ".join(self.gist.split()) or "(no gist yet: run taproot_migrate)"
        return f"[{self.id}] [{self.category}] [{self.salience}] [{day(self.last_touch)}] {gist}"


@dataclass(frozen=True)
class ClosingEntry:
    id: str
    reflection: str
    created_at: datetime
    conversation_title: str | None = None

    def slim(self) -> dict[str, Any]:
        item: dict[str, Any] = {"id": self.id}
        if self.conversation_title:
            item["conversation_title"] = self.conversation_title
        item["reflection"] = self.reflection
        item["created_at"] = isoformat(self.created_at)
        return item


@dataclass(frozen=True)
class ReflectPayload:
    payload: dict[str, Any]
    text: str  # exactly what is sent
    tokens: int
    bytes: int
    max_tokens: int
    core_tokens: int
    included: list[CatalogEntry]
    # The cut lines that were read; `cut_count` also counts those never read because
    # they could not have fitted (see `max_catalog_lines`).
    cut: list[CatalogEntry]
    cut_count: int = 0
    warnings: list[str] = field(default_factory=list)

    @property
    def kilobytes(self) -> float:
        return round(self.bytes / 1024, 1)


def estimate_tokens(text: str) -> int:
    return math.ceil(len(text) / 4)


# The shortest a catalog line can be in the payload: a 36-character id, the brackets and
# spaces, a date and a one-character gist, in quotes, with a separating comma.
MIN_LINE_CHARS = 36 + 12 + 10 + 1 + 3


def max_catalog_lines(max_tokens: int) -> int:
    """No payload within `max_tokens` can hold more catalog lines than this."""
    return max_tokens * 4 // MIN_LINE_CHARS + 1


def catalog_order(entry: CatalogEntry) -> tuple[int, int, str]:
    """Salience high to low, then last touch newest first, then id."""
    return (salience_rank(entry.salience), -micros(entry.last_touch), entry.id)


@dataclass(frozen=True)
class _Rendered:
    n_cut: int
    payload: dict[str, Any]
    text: str
    tokens: int


def build_reflect_payload(
    *,
    core: Iterable[CoreEntry],
    catalog: Iterable[CatalogEntry],
    omitted: dict[str, int],
    closings: Iterable[ClosingEntry],
    window_days: int,
    max_tokens: int,
    unlisted: dict[str, int] | None = None,
) -> ReflectPayload:
    """Assemble the payload and cut catalog lines until it fits `max_tokens`.

    `catalog` holds the lines the window admits, `omitted` the per-category counts of
    live non-core memories it left out. `unlisted` counts lines the window admits that
    the caller did not read because they come after `max_catalog_lines` in catalog
    order: they are cut whatever happens.
    """
    core_by_category: dict[str, list[CoreEntry]] = {c: [] for c in CATEGORY_ORDER}
    for entry in core:
        core_by_category[home_category(entry.category)].append(entry)
    core_memories = {}
    for category, entries in core_by_category.items():
        entries.sort(key=lambda e: (-micros(e.updated_at), e.id))
        entries.sort(key=lambda e: salience_rank(e.salience))
        core_memories[category] = [e.slim() for e in entries]
    core_count = sum(len(v) for v in core_memories.values())

    lines = sorted(catalog, key=catalog_order)
    # Each line is formatted and measured once, however many cuts are tried.
    homes = [home_category(entry.category) for entry in lines]
    texts = [entry.line() for entry in lines]
    closing_items = [c.slim() for c in closings]
    base_omitted = dict.fromkeys(CATEGORY_ORDER, 0)
    for category, count in omitted.items():
        base_omitted[home_category(category)] += int(count)
    always_cut = dict.fromkeys(CATEGORY_ORDER, 0)
    for category, count in (unlisted or {}).items():
        always_cut[home_category(category)] += int(count)

    def render(n_cut: int) -> _Rendered:
        kept = len(lines) - n_cut
        grouped: dict[str, list[str]] = {c: [] for c in CATEGORY_ORDER}
        cut_counts = dict(always_cut)
        for index, home in enumerate(homes):
            if index < kept:
                grouped[home].append(texts[index])
            else:
                cut_counts[home] += 1
        budget: dict[str, Any] = {"max_tokens": max_tokens, "tokens": 0, "cut": cut_counts}
        payload = {
            "status": "ok",
            "usage_note": USAGE_NOTE,
            "core_memories": core_memories,
            "core_count": core_count,
            "catalog": grouped,
            "catalog_count": kept,
            "catalog_omitted": {c: base_omitted[c] + cut_counts[c] for c in CATEGORY_ORDER},
            "catalog_note": catalog_note(
                omitted=sum(base_omitted.values()),
                cut=sum(cut_counts.values()),
                window_days=window_days,
            ),
            "recent_closings": closing_items,
            "budget": budget,
        }
        # `tokens` counts the whole string, itself included. Serialise once with a 0
        # there, then find the fixed point arithmetically: only its digits change.
        draft = dumps(payload)
        marker = draft.rindex('"tokens":0,"cut":') + len('"tokens":')
        before, after = draft[:marker], draft[marker + 1 :]
        tokens = estimate_tokens(before + after) + 1
        while (fixed := estimate_tokens(before + str(tokens) + after)) != tokens:
            tokens = fixed
        budget["tokens"] = tokens
        return _Rendered(n_cut, payload, before + str(tokens) + after, tokens)

    result = render(len(lines))
    if lines and result.tokens <= max_tokens:
        # Some lines fit: find the fewest cuts that fit. Estimate from the lines'
        # lengths, then settle exactly on real renders.
        whole = render(0)
        result = whole
        if whole.tokens > max_tokens:
            excess = len(whole.text) - max_tokens * 4
            n_cut, removed = 0, 0
            while n_cut < len(lines) and removed < excess:
                n_cut += 1
                removed += len(dumps(texts[-n_cut])) + 1
            result = render(n_cut)
            while result.tokens > max_tokens:
                result = render(result.n_cut + 1)
            while result.n_cut > 0:
                fewer = render(result.n_cut - 1)
                if fewer.tokens > max_tokens:
                    break
                result = fewer

    tokens = result.tokens
    core_tokens = estimate_tokens(dumps(core_memories))
    warnings: list[str] = []
    if tokens > max_tokens:
        warnings.append(
            f"Core memories and closings alone need about {tokens:,} tokens, over the "
            f"{max_tokens:,}-token budget: the payload is sent whole. Demote or compress "
            "core memories."
        )
    if core_tokens > max_tokens / 2:
        warnings.append(
            f"Core memories alone use about {core_tokens:,} tokens, more than half of the "
            f"{max_tokens:,}-token budget."
        )
    kept = len(lines) - result.n_cut
    return ReflectPayload(
        payload=result.payload,
        text=result.text,
        tokens=tokens,
        bytes=len(result.text.encode()),
        max_tokens=max_tokens,
        core_tokens=core_tokens,
        included=lines[:kept],
        cut=lines[kept:],
        cut_count=sum(result.payload["budget"]["cut"].values()),
        warnings=warnings,
    )


def catalog_note(*, omitted: int, cut: int, window_days: int) -> str:
    """One sentence on the catalog; it speaks of left-out memories only when there are some."""
    if not omitted and not cut:
        return (
            "Every memory is listed; taproot_recall(query|category|ids) gives the full text "
            "of any catalog line."
        )
    if not omitted:
        note = (
            f"{cut} memor{'y is' if cut == 1 else 'ies are'} not listed: left out to keep "
            "this payload under its token budget"
        )
    else:
        note = (
            f"{omitted} memor{'y is' if omitted == 1 else 'ies are'} not listed: "
            f"lower-salience and untouched for more than {window_days} days"
        )
        if cut:
            note += (
                f", and {cut} more {'was' if cut == 1 else 'were'} left out to keep this "
                "payload under its token budget"
            )
    return note + "; all stay reachable with taproot_recall(query|category|ids)."
