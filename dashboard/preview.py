"""The Reflect Preview: the payload `taproot_reflect` sends, arranged for people.

Built only from memories.services.reflect's ReflectPayload (the same function the tool
calls), so the sidebar can never show something other than what Claude loads.
"""

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.utils.timesince import timesince

from memories.payload_entries import CatalogEntry, CoreEntry, ReflectPayload, catalog_headings
from memories.services import ReflectHistory
from memories.vocabulary import CATEGORY_ORDER, home_category

NEAR_BUDGET_SHARE = 0.8


@dataclass(frozen=True)
class CoreBlock:
    """A core memory sent in full: its entry (whole id, for links) and what is sent."""

    entry: CoreEntry
    item: dict[str, Any]


@dataclass(frozen=True)
class PreviewLine:
    """A line as sent, with the memory it stands for and the month heading sent before it
    (catalog lines only, where their category's month changes)."""

    entry: CatalogEntry | CoreEntry
    text: str
    heading: str | None = None

    @property
    def category(self) -> str:
        return home_category(self.entry.category)


@dataclass(frozen=True)
class CategoryPreview:
    category: str
    core: list[CoreBlock]
    lines: list[PreviewLine]  # catalog lines as sent, in payload order
    omitted_by_window: int
    cut_by_budget: int

    @property
    def omitted(self) -> int:
        return self.omitted_by_window + self.cut_by_budget


@dataclass(frozen=True)
class Preview:
    reflect: ReflectPayload
    categories: list[CategoryPreview]
    core_overflow: list[PreviewLine]
    cut_lines: list[PreviewLine]
    loaded: ReflectHistory | None = None
    now: datetime | None = None

    @property
    def payload(self) -> dict[str, Any]:
        return self.reflect.payload

    @property
    def cut(self) -> list[CatalogEntry]:
        return self.reflect.cut

    @property
    def included_ids(self) -> set[str]:
        """Ids of the catalog lines the payload carries; a window-admitted memory that is
        not among them was cut by the budget (whether or not reflect read its line)."""
        return {entry.id for entry in self.reflect.included}

    @property
    def cut_not_shown(self) -> int:
        return self.reflect.cut_count - len(self.reflect.cut)

    @property
    def core_count(self) -> int:
        return int(self.payload["core_count"])

    @property
    def core_omitted(self) -> int:
        return self.reflect.core_omitted

    @property
    def catalog_count(self) -> int:
        return int(self.payload["catalog_count"])

    @property
    def omitted_count(self) -> int:
        return sum(self.payload.get("catalog_omitted", {}).values())

    @property
    def budget_percent(self) -> int:
        return round(100 * self.reflect.tokens / self.reflect.max_tokens)

    @property
    def core_percent(self) -> int:
        return round(100 * self.reflect.core_tokens / self.reflect.max_tokens)

    @property
    def near_budget_tokens(self) -> int:
        return int(NEAR_BUDGET_SHARE * self.reflect.max_tokens)

    @property
    def core_heavy_tokens(self) -> int:
        return self.reflect.max_tokens // 2

    @property
    def near_budget(self) -> bool:
        """Past 80 % of the budget."""
        return self.reflect.tokens > NEAR_BUDGET_SHARE * self.reflect.max_tokens

    @property
    def core_heavy(self) -> bool:
        """Core memories alone pass half the budget."""
        return self.reflect.core_tokens > self.reflect.max_tokens / 2

    @property
    def warn(self) -> bool:
        return self.near_budget or self.core_heavy or bool(self.reflect.warnings)

    @property
    def loaded_sentence(self) -> str:
        """Whether and when Claude last loaded the memory, through which client."""
        if self.loaded is None or self.loaded.last_at is None:
            return "Claude has not loaded your memory yet: taproot_reflect was never called."
        since = self.now - self.loaded.last_at if self.now else None
        if since is not None and since < timedelta(minutes=1):
            when = "just now"
        else:
            when = timesince(self.loaded.last_at, self.now, depth=1) + " ago"
        client = f" ({self.loaded.last_client})" if self.loaded.last_client else ""
        return f"Claude last loaded your memory {when}{client}"


def build_preview(
    reflect: ReflectPayload,
    loaded: ReflectHistory | None = None,
    now: datetime | None = None,
    *,
    cut_ids: dict[str, str] | None = None,
) -> Preview:
    """The preview of this payload; `cut_ids` gives the short ids of the lines the budget
    cut (shown, though not sent)."""
    payload = reflect.payload
    core: dict[str, list[CoreBlock]] = {c: [] for c in CATEGORY_ORDER}
    # Full entries in the order the payload lists them: match each sent item to its entry.
    entries = {reflect.shown_id(e.id): e for e in reflect.core_full}
    for category, items in payload["core_memories"].items():
        core[category] = [CoreBlock(entries[item["id"]], item) for item in items]
    lines: dict[str, list[PreviewLine]] = {c: [] for c in CATEGORY_ORDER}
    for entry, heading in zip(reflect.included, catalog_headings(reflect.included), strict=True):
        lines[home_category(entry.category)].append(
            PreviewLine(entry, entry.line(reflect.shown_id(entry.id)), heading)
        )
    cut = payload["budget"].get("cut", {})
    omitted = payload.get("catalog_omitted", {})
    categories = [
        CategoryPreview(
            category=category,
            core=core[category],
            lines=lines[category],
            omitted_by_window=omitted.get(category, 0) - cut.get(category, 0),
            cut_by_budget=cut.get(category, 0),
        )
        for category in CATEGORY_ORDER
    ]
    return Preview(
        reflect=reflect,
        categories=categories,
        core_overflow=[
            PreviewLine(entry, entry.line(reflect.shown_id(entry.id)))
            for entry in reflect.core_lines
        ],
        cut_lines=[
            PreviewLine(
                entry, entry.line((cut_ids or {}).get(entry.id, reflect.shown_id(entry.id)))
            )
            for entry in reflect.cut
        ],
        loaded=loaded,
        now=now,
    )
