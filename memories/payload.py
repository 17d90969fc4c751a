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

CATEGORIES: tuple[str, ...] = ("identity", "relationship", "active_thread", "error", "episodic")
SALIENCE_ORDER = {"high": 0, "medium": 1, "low": 2}
# Drifted categories are shown where migrate would put them.
_LEGACY_HOME = {
    "active_threads": "active_thread",
    "identity_observations": "identity",
    "relationship_texture": "relationship",
    "event": "episodic",
    "project": "active_thread",
    "completed_project": "episodic",
}

USAGE_NOTE = (
    "Two tiers. core_memories are loaded in full every time: who you are, who you are "
    "talking to, standing corrections and live threads. catalog holds one line per other "
    "recent or important memory: [id] [category] [salience] [last touched] gist. When a "
    "line looks relevant, load its full text with taproot_recall(ids=[...]); search "
    "everything, including what the catalog leaves out, with taproot_recall(query=...) or "
    "taproot_recall(category=...)."
)


def home_category(category: str) -> str:
    folded = category.strip().lower()
    if folded in CATEGORIES:
        return folded
    return _LEGACY_HOME.get(folded, "error")


def _salience_rank(salience: str) -> int:
    return SALIENCE_ORDER.get(salience, len(SALIENCE_ORDER))


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
    cut: list[CatalogEntry]
    warnings: list[str] = field(default_factory=list)

    @property
    def kilobytes(self) -> float:
        return round(self.bytes / 1024, 1)


def estimate_tokens(text: str) -> int:
    return math.ceil(len(text) / 4)


def catalog_order(entry: CatalogEntry) -> tuple[int, int, str]:
    """Salience high to low, then last touch newest first, then id."""
    return (_salience_rank(entry.salience), -micros(entry.last_touch), entry.id)


def build_reflect_payload(
    *,
    core: Iterable[CoreEntry],
    catalog: Iterable[CatalogEntry],
    omitted: dict[str, int],
    closings: Iterable[ClosingEntry],
    window_days: int,
    max_tokens: int,
) -> ReflectPayload:
    """Assemble the payload and cut catalog lines until it fits `max_tokens`.

    `catalog` holds the lines the window admits, `omitted` the per-category counts of
    live non-core memories it left out.
    """
    core_by_category: dict[str, list[CoreEntry]] = {c: [] for c in CATEGORIES}
    for entry in core:
        core_by_category[home_category(entry.category)].append(entry)
    core_memories = {}
    for category, entries in core_by_category.items():
        entries.sort(key=lambda e: (-micros(e.updated_at), e.id))
        entries.sort(key=lambda e: _salience_rank(e.salience))
        core_memories[category] = [e.slim() for e in entries]
    core_count = sum(len(v) for v in core_memories.values())

    lines = sorted(catalog, key=catalog_order)
    closing_items = [c.slim() for c in closings]
    base_omitted = dict.fromkeys(CATEGORIES, 0)
    for category, count in omitted.items():
        base_omitted[home_category(category)] += int(count)

    def assemble(n_cut: int, tokens: int) -> dict[str, Any]:
        kept = lines[: len(lines) - n_cut] if n_cut else lines
        cut_lines = lines[len(lines) - n_cut :] if n_cut else []
        cut_counts = {c: 0 for c in CATEGORIES}
        for entry in cut_lines:
            cut_counts[home_category(entry.category)] += 1
        grouped: dict[str, list[str]] = {c: [] for c in CATEGORIES}
        for entry in kept:
            grouped[home_category(entry.category)].append(entry.line())
        omitted_counts = {c: base_omitted[c] + cut_counts[c] for c in CATEGORIES}
        return {
            "status": "ok",
            "usage_note": USAGE_NOTE,
            "core_memories": core_memories,
            "core_count": core_count,
            "catalog": grouped,
            "catalog_count": len(kept),
            "catalog_omitted": omitted_counts,
            "catalog_note": catalog_note(
                omitted=sum(base_omitted.values()), cut=n_cut, window_days=window_days
            ),
            "recent_closings": closing_items,
            "budget": {"max_tokens": max_tokens, "tokens": tokens, "cut": cut_counts},
        }

    def render(n_cut: int) -> tuple[dict[str, Any], str, int]:
        # `tokens` counts the whole string, itself included: iterate to the fixed point
        # (more digits only ever make the string longer, so this settles at once).
        tokens = 0
        for _ in range(8):
            payload = assemble(n_cut, tokens)
            text = dumps(payload)
            measured = estimate_tokens(text)
            if measured == tokens:
                break
            tokens = measured
        return payload, text, tokens

    n_cut = 0
    payload, text, tokens = render(0)
    if tokens > max_tokens and lines:
        # Estimate how many lines to drop from their lengths, then settle exactly: the
        # fewest cut lines for which the payload fits.
        excess = (tokens - max_tokens) * 4
        removed = 0
        while n_cut < len(lines) and removed < excess:
            removed += len(dumps(lines[len(lines) - 1 - n_cut].line())) + 1
            n_cut += 1
        payload, text, tokens = render(n_cut)
        while tokens > max_tokens and n_cut < len(lines):
            n_cut += 1
            payload, text, tokens = render(n_cut)
        while n_cut > 0:
            candidate = render(n_cut - 1)
            if candidate[2] > max_tokens:
                break
            n_cut -= 1
            payload, text, tokens = candidate

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
    return ReflectPayload(
        payload=payload,
        text=text,
        tokens=tokens,
        bytes=len(text.encode()),
        max_tokens=max_tokens,
        core_tokens=core_tokens,
        included=lines[: len(lines) - n_cut],
        cut=lines[len(lines) - n_cut :] if n_cut else [],
        warnings=warnings,
    )


def catalog_note(*, omitted: int, cut: int, window_days: int) -> str:
    note = (
        f"{omitted} memor{'y is' if omitted == 1 else 'ies are'} not listed: lower-salience "
        f"and untouched for more than {window_days} days"
    )
    if cut:
        note += (
            f", and {cut} more {'was' if cut == 1 else 'were'} left out to keep this payload "
            "under its token budget"
        )
    return note + "; all stay reachable with taproot_recall(query|category|ids)."
