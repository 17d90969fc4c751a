"""The Reflect Preview: the payload `taproot_reflect` sends, arranged for people.

Built only from memories.services.reflect's ReflectPayload (the same function the tool
calls), so the sidebar can never show something other than what Claude loads.
"""

from dataclasses import dataclass
from typing import Any

from memories.payload import CatalogEntry, ReflectPayload
from memories.vocabulary import CATEGORY_ORDER, home_category

NEAR_BUDGET_SHARE = 0.8


@dataclass(frozen=True)
class CategoryPreview:
    category: str
    core: list[dict[str, Any]]  # slim core items, as sent
    lines: list[CatalogEntry]  # catalog lines as sent, in payload order
    omitted_by_window: int
    cut_by_budget: int

    @property
    def omitted(self) -> int:
        return self.omitted_by_window + self.cut_by_budget


@dataclass(frozen=True)
class Preview:
    reflect: ReflectPayload
    categories: list[CategoryPreview]

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
    def catalog_count(self) -> int:
        return int(self.payload["catalog_count"])

    @property
    def omitted_count(self) -> int:
        return sum(self.payload["catalog_omitted"].values())

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
        """Past 80 % of the budget (or over it)."""
        return self.reflect.tokens > NEAR_BUDGET_SHARE * self.reflect.max_tokens

    @property
    def core_heavy(self) -> bool:
        """Core memories alone pass half the budget."""
        return self.reflect.core_tokens > self.reflect.max_tokens / 2

    @property
    def warn(self) -> bool:
        return self.near_budget or self.core_heavy or bool(self.reflect.warnings)


def build_preview(reflect: ReflectPayload) -> Preview:
    payload = reflect.payload
    lines: dict[str, list[CatalogEntry]] = {c: [] for c in CATEGORY_ORDER}
    for entry in reflect.included:
        lines[home_category(entry.category)].append(entry)
    cut = payload["budget"]["cut"]
    categories = [
        CategoryPreview(
            category=category,
            core=list(payload["core_memories"][category]),
            lines=lines[category],
            omitted_by_window=payload["catalog_omitted"][category] - cut[category],
            cut_by_budget=cut[category],
        )
        for category in CATEGORY_ORDER
    ]
    return Preview(reflect=reflect, categories=categories)
