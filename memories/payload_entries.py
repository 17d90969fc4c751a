"""The pieces of the reflect payload (memories.payload builds it): its entries and the
lines they are sent as, what a built payload reports (`ReflectPayload`), how its tokens are
estimated, the order of the catalog, and the payload's own words (the usage note, the
catalog note, the warnings)."""

import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from memories.timeutil import day, isoformat, micros
from memories.vocabulary import HIGH, SHORT_ID_MIN, home_category, salience_rank

USAGE_NOTE = (
    "Catalog lines read [id] gist ([high] marks high salience), high first then the most "
    "recently touched, under the month last touched (2026-11:); core_overflow lines add "
    "the category after the id: load any memory in full with taproot_recall(ids=[...]) "
    "and search all, listed or not, with taproot_recall(query=...)."
)
NO_GIST = "(no gist yet: run taproot_migrate)"
# Ends a closing reflection cut short to fit the budget.
SHORTENED_MARKER = " […shortened to fit the token budget]"
# A closing is never shortened below this many characters of its text: it is left out.
CLOSING_MIN_CHARS = 100


def _salience_mark(salience: str) -> str:
    """Only high salience is said: it is what changes what Claude does with a line."""
    return "[high] " if salience == HIGH else ""


def gist_text(gist: str) -> str:
    return " ".join(gist.split()) or NO_GIST


@dataclass(frozen=True)
class CoreEntry:
    """A live core memory. `content` is None when the caller did not read it because it
    could not fit in full (see `core_content_fits`)."""

    id: str
    category: str
    salience: str
    gist: str
    updated_at: datetime
    last_touch: datetime
    content: str | None = None
    linked_memories: Sequence[str] = ()

    def slim(self, shown: Mapping[str, str] | None = None) -> dict[str, Any]:
        """As sent in full, under its category (so without it)."""
        assert self.content is not None
        item: dict[str, Any] = {
            "id": shown_id(shown, self.id),
            "salience": self.salience,
            "content": self.content,
            "updated_at": isoformat(self.updated_at),
        }
        if self.linked_memories:
            item["linked_memories"] = [shown_id(shown, link) for link in self.linked_memories]
        return item

    def line(self, shown_id: str | None = None) -> str:
        """As sent in core_overflow: a catalog line that names its category."""
        return (
            f"[{shown_id or self.id}] [{home_category(self.category)}] "
            f"{_salience_mark(self.salience)}{gist_text(self.gist)}"
        )


@dataclass(frozen=True)
class CatalogEntry:
    id: str
    category: str
    salience: str
    gist: str
    last_touch: datetime

    def line(self, shown_id: str | None = None) -> str:
        """As sent, under its category."""
        return f"[{shown_id or self.id}] {_salience_mark(self.salience)}{gist_text(self.gist)}"

    def heading(self) -> str:
        """The month of its last touch, as the item that heads its lines: "2026-11:"."""
        return f"{day(self.last_touch)[:7]}:"


@dataclass(frozen=True)
class ClosingEntry:
    id: str
    reflection: str
    created_at: datetime
    conversation_title: str | None = None

    def slim(self, reflection: str | None = None) -> dict[str, Any]:
        item: dict[str, Any] = {"id": self.id}
        if self.conversation_title:
            item["conversation_title"] = self.conversation_title
        item["reflection"] = self.reflection if reflection is None else reflection
        item["created_at"] = isoformat(self.created_at)
        return item


def shown_id(shown: Mapping[str, str] | None, memory_id: str) -> str:
    return shown.get(memory_id, memory_id) if shown is not None else memory_id


@dataclass(frozen=True)
class ReflectPayload:
    payload: dict[str, Any]
    text: str  # exactly what is sent
    tokens: int
    bytes: int
    max_tokens: int
    core_tokens: int  # the core tier as sent: core_memories and core_overflow
    included: list[CatalogEntry]
    # The cut lines that were read; `cut_count` also counts those never read because
    # they could not have fitted.
    cut: list[CatalogEntry]
    cut_count: int = 0
    warnings: list[str] = field(default_factory=list)
    # Core memories in core order: sent in full, sent as lines, and read but left out;
    # `core_omitted` also counts those never read.
    core_full: list[CoreEntry] = field(default_factory=list)
    core_lines: list[CoreEntry] = field(default_factory=list)
    core_cut: list[CoreEntry] = field(default_factory=list)
    core_omitted: int = 0
    closings_shortened: int = 0
    closings_dropped: int = 0
    shown_ids: Mapping[str, str] = field(default_factory=dict)

    @property
    def kilobytes(self) -> float:
        return round(self.bytes / 1024, 1)

    def shown_id(self, memory_id: str) -> str:
        """A memory id as the payload shows it."""
        return self.shown_ids.get(memory_id, memory_id)

    def ids_shown(self) -> list[str]:
        """Every memory id the payload shows (whole ids)."""
        ids = [e.id for e in (*self.core_full, *self.core_lines)]
        ids += [link for e in self.core_full for link in e.linked_memories]
        return ids + [e.id for e in self.included]


def estimate_tokens(text: str) -> int:
    return math.ceil(len(text) / 4)


# The shortest a line can be in the payload, as counted against the budget: an id of
# SHORT_ID_MIN characters and a one-character gist, in quotes, with a separating comma.
# A core memory sent in full is longer still.
MIN_LINE_CHARS = len(f'"[{"0" * SHORT_ID_MIN}] x",')


def max_lines(chars: int) -> int:
    """No payload can hold more lines than this in `chars` characters."""
    return max(chars, 0) // MIN_LINE_CHARS + 1 if chars > 0 else 0


def line_chars(gist: str) -> int:
    """The fewest characters a line of this gist takes against the budget, catalog or
    core_overflow: MIN_LINE_CHARS with the gist as shown for its one character."""
    return MIN_LINE_CHARS - 1 + len(gist_text(gist))


def core_chars(content_length: int, gist: str) -> int:
    """The fewest characters a core memory takes against the budget, in full (its text
    and more) or as a line, whichever it ends as."""
    return max(MIN_LINE_CHARS, min(content_length, line_chars(gist)))


def could_fit[T](items: Iterable[T], chars: Callable[[T], int], room: int) -> Iterator[T]:
    """The first `items` (in the order they would be sent) that a payload could send in
    `room` characters, each taking at least `chars` of it, and one more: nothing after
    them is taken from `items`, so a reader stops there. With every item at
    MIN_LINE_CHARS, as many as `max_lines(room)`."""
    if room <= 0:
        return
    used = 0
    for item in items:
        yield item
        used += chars(item)
        if used > room:
            return


def catalog_order(entry: CatalogEntry | CoreEntry) -> tuple[int, int, str]:
    """Salience high to low, then last touch newest first, then id (also the core order:
    the core memories that fit in full are the first of it)."""
    return (salience_rank(entry.salience), -micros(entry.last_touch), entry.id)


def core_content_fits(content_lengths: Iterable[int], max_tokens: int) -> int:
    """How many core memories, in core order with these content lengths, could possibly be
    sent in full: each needs all before it in full, and at least its text's length."""
    room = max_tokens * 4
    fitting = 0
    for length in content_lengths:
        room -= length
        if room < 0:
            break
        fitting += 1
    return fitting


def catalog_headings(lines: Iterable[CatalogEntry]) -> list[str | None]:
    """For catalog lines in catalog order, the month heading each one opens (None when the
    line before it in its category was touched in the same month). A category's lines
    sent are always the first of its order, so a line's heading is the same whatever the
    budget cuts."""
    last: dict[str, str] = {}
    headings: list[str | None] = []
    for entry in lines:
        home, heading = home_category(entry.category), entry.heading()
        headings.append(None if last.get(home) == heading else heading)
        last[home] = heading
    return headings


def catalog_items(
    lines: Sequence[CatalogEntry], shown: Mapping[str, str] | None
) -> list[list[str]]:
    """Each catalog line as sent: its text, after the heading it opens."""
    return [
        ([heading] if heading else []) + [entry.line(shown_id(shown, entry.id))]
        for entry, heading in zip(lines, catalog_headings(lines), strict=True)
    ]


def payload_warnings(reflect: ReflectPayload) -> list[str]:
    warnings: list[str] = []
    budget = f"{reflect.max_tokens:,}-token budget"
    if reflect.tokens > reflect.max_tokens:
        warnings.append(
            f"Even with everything else left out the payload needs about {reflect.tokens:,} "
            f"tokens, over its {budget}: raise REFLECT_MAX_TOKENS."
        )
    core_count = reflect.payload["core_count"]
    if not_in_full := core_count - len(reflect.core_full):
        how = f"{len(reflect.core_lines):,} are sent as catalog lines (core_overflow)"
        if reflect.core_omitted:
            how += f" and {reflect.core_omitted:,} are left out (core_omitted)"
        warnings.append(
            f"{not_in_full:,} of the {core_count:,} core memories do not fit in full in the "
            f"{budget}: {how}. Demote the ones that need not be loaded in full every time."
        )
    if reflect.closings_shortened or reflect.closings_dropped:
        done = []
        if reflect.closings_shortened:
            done.append(f"{reflect.closings_shortened} shortened")
        if reflect.closings_dropped:
            done.append(f"{reflect.closings_dropped} left out")
        warnings.append(
            f"Of the recent closings, {' and '.join(done)} to keep the payload within its {budget}."
        )
    if reflect.core_tokens > reflect.max_tokens / 2:
        warnings.append(
            f"Core memories alone use about {reflect.core_tokens:,} tokens, more than half of "
            f"the {budget}."
        )
    return warnings


def catalog_note(*, omitted: int, cut: int, window_days: int | None) -> str:
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
