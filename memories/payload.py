"""The reflect payload (SPEC §5) as a pure function over plain values.

`taproot_reflect`, `taproot_status` and the dashboard preview all call
`build_reflect_payload`, so what people see is exactly what Claude loads.

The payload never passes its token budget. What gives way, in order: catalog lines (the
end of the catalog order first), then the recent closings (the oldest first: shortened
with a marker, then left out), then core memories: those that do not fit in full (the end
of the core order) are sent as catalog-style lines in `core_overflow`, and when even those
lines do not fit, the last of them are left out and counted in `core_omitted`. That order
is `GIVES_WAY`, declared once: the builder gives way by it and `catalog_read_room` (the
room reflect reads catalog lines for) derives from it, so reordering it cannot make the
bounded read send something other than a full read would.

A fast path: finding what gives way tries many layouts, and each one's text is put
together from pieces serialised once (`_Builder.assemble`) rather than serialised whole.
Its plain equivalent is `dumps(_Builder.payload(layout, tokens))`, which serialises every
piece again for each layout tried; serialising whole payloads while looking for the cut
is what made `reflect` slow before (docs/benchmarks.md, "1. `reflect` and `status` did
work for lines they then dropped"). The text sent is byte for byte that equivalent's:
tests/memories/test_payload.py holds `text == dumps(payload)` on random stores and
budgets (test_the_payload_never_exceeds_its_budget_and_gives_way_in_order) and with every
key present (test_text_is_the_compact_json_of_the_payload_and_tokens_measure_it).

Its pieces (the entries and their lines, what a payload reports, its words) are in
memories.payload_entries.
"""

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

from memories.jsonutil import dumps
from memories.payload_entries import (
    CLOSING_MIN_CHARS,
    SHORTENED_MARKER,
    USAGE_NOTE,
    CatalogEntry,
    ClosingEntry,
    CoreEntry,
    ReflectPayload,
    catalog_items,
    catalog_note,
    catalog_order,
    core_content_fits,
    estimate_tokens,
    gist_text,
    payload_warnings,
    shown_id,
)
from memories.timeutil import micros
from memories.vocabulary import CATEGORY_ORDER, home_category, salience_rank


class GivesWay(StrEnum):
    CATALOG_LINES = "catalog lines"  # from the end of the catalog order
    CLOSINGS = "closings"  # the oldest first: shortened, then left out
    CORE_IN_FULL = "core in full"  # from the end of the core order, sent as lines instead
    CORE_LINES = "core lines"  # from the end of the core order, counted in core_omitted


# What gives way, first to last, until the payload fits its budget. Each gives way only
# once everything before it has given way entirely.
GIVES_WAY: tuple[GivesWay, ...] = (
    GivesWay.CATALOG_LINES,
    GivesWay.CLOSINGS,
    GivesWay.CORE_IN_FULL,
    GivesWay.CORE_LINES,
)


def catalog_read_room(
    *, max_tokens: int, core: Sequence[tuple[int, str]], n_full: int, closings: Sequence[str]
) -> int:
    """No payload sends catalog lines taking more characters than this, for these core
    memories in core order (each one's content length and gist), of which the first
    `n_full` could fit in full (`core_content_fits`), and these closings' reflections.
    While any catalog line is sent, whatever gives way after the catalog lines is sent
    whole, so what it takes at the least is not room for lines. Reflect reads catalog
    lines while they could fit in it (`could_fit`, each taking at least `line_chars`)."""
    later = set(GIVES_WAY[GIVES_WAY.index(GivesWay.CATALOG_LINES) + 1 :])
    taken = len(USAGE_NOTE)
    if GivesWay.CLOSINGS in later:
        taken += sum(len(reflection) for reflection in closings)
    for index, (content_length, gist) in enumerate(core):
        line_length = len(gist_text(gist)) if GivesWay.CORE_LINES in later else 0
        if index < n_full and GivesWay.CORE_IN_FULL in later:
            taken += content_length
        elif index < n_full:
            # In full or as a line, whichever it ends as.
            taken += min(content_length, line_length)
        else:
            taken += line_length
    return max_tokens * 4 - taken


@dataclass(frozen=True)
class _Layout:
    n_full: int  # core memories sent in full: the first of the core order
    n_core_lines: int  # the next ones, sent as lines in core_overflow
    closings: tuple[str | None, ...]  # each closing's reflection as sent; None: left out
    n_catalog: int  # catalog lines sent: the first of the catalog order


@dataclass(frozen=True)
class _Rendered:
    layout: _Layout
    text: str
    tokens: int


@dataclass(frozen=True)
class _Parts:
    """What a layout sends, as plain values (indices into the builder's sorted lists)."""

    core_groups: dict[str, list[int]]  # category → core memories in full, in display order
    core_omitted: int
    catalog_groups: dict[str, list[int]]  # category → catalog lines
    cut_counts: dict[str, int]  # catalog lines cut, per category
    omitted_counts: dict[str, int]  # non-zero only
    note: str
    closings: list[tuple[int, str]]  # (index, reflection as sent)


# How far an estimate of a layout's length may fall short of it (category keys and the
# core_overflow key appearing or going): generous, so no layout that fits is skipped.
_ESTIMATE_SLACK = 256


class _Builder:
    def __init__(
        self,
        *,
        core: Iterable[CoreEntry],
        catalog: Iterable[CatalogEntry],
        omitted: dict[str, int],
        closings: Iterable[ClosingEntry],
        window_days: int | None,
        max_tokens: int,
        unlisted: dict[str, int] | None,
        core_unlisted: int,
        shown_ids: Mapping[str, str] | None,
    ) -> None:
        self.shown = dict(shown_ids) if shown_ids is not None else None
        self.window_days = window_days
        self.max_tokens = max_tokens
        self.core = sorted(core, key=catalog_order)
        self.n_readable = 0
        while self.n_readable < len(self.core) and self.core[self.n_readable].content is not None:
            self.n_readable += 1
        # Those that could not fit in full with everything else left out are not tried in
        # full: nothing gives way for them, and a reader that did not read their text (as
        # reflect does not) gets the same payload as one that did.
        self.n_readable = core_content_fits(
            (len(e.content or "") for e in self.core[: self.n_readable]), max_tokens
        )
        self.lines = sorted(catalog, key=catalog_order)
        self.closings = list(closings)
        self.base_omitted = dict.fromkeys(CATEGORY_ORDER, 0)
        for category, count in omitted.items():
            self.base_omitted[home_category(category)] += int(count)
        self.always_cut = dict.fromkeys(CATEGORY_ORDER, 0)
        for category, count in (unlisted or {}).items():
            self.always_cut[home_category(category)] += int(count)
        self.core_count = len(self.core) + core_unlisted
        # Every piece is serialised once, however many layouts are tried.
        readable = self.core[: self.n_readable]
        self.core_homes = [home_category(e.category) for e in self.core]
        self.display_key = [
            (salience_rank(e.salience), -micros(e.updated_at), e.id) for e in readable
        ]
        self.full_items = [e.slim(self.shown) for e in readable]
        self.full_json = [dumps(item) for item in self.full_items]
        self.core_line_text = [e.line(shown_id(self.shown, e.id)) for e in self.core]
        self.core_line_json = [dumps(text) for text in self.core_line_text]
        self.catalog_homes = [home_category(e.category) for e in self.lines]
        self.catalog_text = catalog_items(self.lines, self.shown)
        self.catalog_json = [",".join(dumps(t) for t in items) for items in self.catalog_text]

    # --- one layout ------------------------------------------------------------------

    def parts(self, layout: _Layout) -> _Parts:
        core_groups: dict[str, list[int]] = {}
        for index in sorted(range(layout.n_full), key=self.display_key.__getitem__):
            core_groups.setdefault(self.core_homes[index], []).append(index)
        catalog_groups: dict[str, list[int]] = {}
        cut_counts = dict(self.always_cut)
        for index, home in enumerate(self.catalog_homes):
            if index < layout.n_catalog:
                catalog_groups.setdefault(home, []).append(index)
            else:
                cut_counts[home] += 1
        omitted_counts = _nonzero({c: self.base_omitted[c] + cut_counts[c] for c in CATEGORY_ORDER})
        note = catalog_note(
            omitted=sum(self.base_omitted.values()),
            cut=sum(cut_counts.values()),
            window_days=self.window_days,
        )
        return _Parts(
            core_groups={c: core_groups[c] for c in CATEGORY_ORDER if c in core_groups},
            core_omitted=self.core_count - layout.n_full - layout.n_core_lines,
            catalog_groups={c: catalog_groups[c] for c in CATEGORY_ORDER if c in catalog_groups},
            cut_counts=cut_counts,
            omitted_counts=omitted_counts,
            note=note,
            closings=[(i, r) for i, r in enumerate(layout.closings) if r is not None],
        )

    def assemble(self, layout: _Layout, tokens: str) -> str:
        """Exactly `dumps(self.payload(layout, tokens))`, from the pieces serialised once."""
        parts = self.parts(layout)
        out = ['{"status":"ok","usage_note":', _USAGE_JSON, ',"core_memories":{']
        out.append(_groups_json(parts.core_groups, self.full_json))
        out.append(f'}},"core_count":{self.core_count}')
        if layout.n_core_lines:
            end = layout.n_full + layout.n_core_lines
            out += [',"core_overflow":[', ",".join(self.core_line_json[layout.n_full : end]), "]"]
        if parts.core_omitted:
            out.append(f',"core_omitted":{parts.core_omitted}')
        out.append(',"catalog":{')
        out.append(_groups_json(parts.catalog_groups, self.catalog_json))
        out.append(f'}},"catalog_count":{layout.n_catalog}')
        if parts.omitted_counts:
            out += [',"catalog_omitted":', dumps(parts.omitted_counts)]
        out += [',"catalog_note":', dumps(parts.note)]
        if parts.closings:
            sent = (dumps(self.closings[i].slim(r)) for i, r in parts.closings)
            out += [',"recent_closings":[', ",".join(sent), "]"]
        out.append(f',"budget":{{"max_tokens":{self.max_tokens},"tokens":{tokens}')
        if cut := _nonzero(parts.cut_counts):
            out += [',"cut":', dumps(cut)]
        out.append("}}")
        return "".join(out)

    def payload(self, layout: _Layout, tokens: int) -> dict[str, Any]:
        parts = self.parts(layout)
        payload: dict[str, Any] = {
            "status": "ok",
            "usage_note": USAGE_NOTE,
            "core_memories": {
                category: [self.full_items[i] for i in indices]
                for category, indices in parts.core_groups.items()
            },
            "core_count": self.core_count,
        }
        if layout.n_core_lines:
            end = layout.n_full + layout.n_core_lines
            payload["core_overflow"] = self.core_line_text[layout.n_full : end]
        if parts.core_omitted:
            payload["core_omitted"] = parts.core_omitted
        payload["catalog"] = {
            category: [text for i in indices for text in self.catalog_text[i]]
            for category, indices in parts.catalog_groups.items()
        }
        payload["catalog_count"] = layout.n_catalog
        if parts.omitted_counts:
            payload["catalog_omitted"] = parts.omitted_counts
        payload["catalog_note"] = parts.note
        if parts.closings:
            payload["recent_closings"] = [self.closings[i].slim(r) for i, r in parts.closings]
        budget: dict[str, Any] = {"max_tokens": self.max_tokens, "tokens": tokens}
        if cut := _nonzero(parts.cut_counts):
            budget["cut"] = cut
        payload["budget"] = budget
        return payload

    def render(self, layout: _Layout) -> _Rendered:
        # `tokens` counts the whole string, itself included: only its digits change, so
        # find the fixed point arithmetically.
        length = len(self.assemble(layout, ""))
        tokens = math.ceil((length + 1) / 4)
        while (fixed := math.ceil((length + len(str(tokens))) / 4)) != tokens:
            tokens = fixed
        return _Rendered(layout, self.assemble(layout, str(tokens)), tokens)

    def fits(self, layout: _Layout) -> _Rendered | None:
        rendered = self.render(layout)
        return rendered if rendered.tokens <= self.max_tokens else None

    # --- what gives way, in order ------------------------------------------------------

    def build(self) -> ReflectPayload:
        everything = tuple(c.reflection for c in self.closings)
        layout = _Layout(
            self.n_readable, len(self.core) - self.n_readable, everything, len(self.lines)
        )
        result = self.fits(layout)
        for what in GIVES_WAY:
            if result is not None:
                break
            result = self.give_way(what, layout)
            layout = self.given_way(what, layout)
        # Only a budget too small for the payload's fixed parts gets past every step.
        return self.finish(result or self.render(layout))

    def give_way(self, what: GivesWay, layout: _Layout) -> _Rendered | None:
        """As little of `what` given way as makes `layout` fit, if giving it all way does."""
        match what:
            case GivesWay.CATALOG_LINES:
                return self.cut_catalog(layout)
            case GivesWay.CLOSINGS:
                return self.shorten_closings(layout)
            case GivesWay.CORE_IN_FULL:
                return self.move_core_to_lines(layout)
            case GivesWay.CORE_LINES:
                return self.cut_core_lines(layout)

    @staticmethod
    def given_way(what: GivesWay, layout: _Layout) -> _Layout:
        """`layout` with all of `what` given way."""
        match what:
            case GivesWay.CATALOG_LINES:
                return replace(layout, n_catalog=0)
            case GivesWay.CLOSINGS:
                return replace(layout, closings=(None,) * len(layout.closings))
            case GivesWay.CORE_IN_FULL:
                return replace(layout, n_full=0, n_core_lines=layout.n_full + layout.n_core_lines)
            case GivesWay.CORE_LINES:
                return replace(layout, n_core_lines=0)

    def fewest_cuts(
        self, layout_for: Callable[[int], _Layout], sizes: list[int]
    ) -> _Rendered | None:
        """The layout with the fewest of these items cut from the end that fits, if cutting
        them all fits; with none cut it does not. Estimated from the items' sizes, then
        settled on real renders."""
        if not sizes or self.fits(layout_for(len(sizes))) is None:
            return None
        excess = len(self.render(layout_for(0)).text) - self.max_tokens * 4
        n_cut, removed = 1, sizes[-1] + 1
        while n_cut < len(sizes) and removed < excess:
            n_cut += 1
            removed += sizes[-n_cut] + 1
        result = self.fits(layout_for(n_cut))
        while result is None:
            n_cut += 1
            result = self.fits(layout_for(n_cut))
        while n_cut > 1 and (fewer := self.fits(layout_for(n_cut - 1))) is not None:
            n_cut -= 1
            result = fewer
        return result

    def cut_catalog(self, layout: _Layout) -> _Rendered | None:
        """Catalog lines cut from the end of the catalog order, as few as fit."""
        total = layout.n_catalog
        return self.fewest_cuts(
            lambda n_cut: replace(layout, n_catalog=total - n_cut),
            [len(j) for j in self.catalog_json[:total]],
        )

    def shorten_closings(self, layout: _Layout) -> _Rendered | None:
        """The closings, oldest first, shortened as little as fits (never below
        CLOSING_MIN_CHARS of text), or else left out."""
        sent = list(layout.closings)
        for index in reversed(range(len(sent))):
            reflection = self.closings[index].reflection
            if sent[index] is None:
                continue

            def kept(n: int, index: int = index, reflection: str = reflection) -> _Layout:
                sent[index] = _shortened(reflection, n)
                return replace(layout, closings=tuple(sent))

            if len(reflection) > CLOSING_MIN_CHARS and self.fits(kept(CLOSING_MIN_CHARS)):
                low, high = CLOSING_MIN_CHARS, len(reflection) - 1  # low fits
                while low < high:
                    middle = (low + high + 1) // 2
                    if self.fits(kept(middle)):
                        low = middle
                    else:
                        high = middle - 1
                return self.fits(kept(low))
            sent[index] = None
            if result := self.fits(replace(layout, closings=tuple(sent))):
                return result
        return None

    def move_core_to_lines(self, layout: _Layout) -> _Rendered | None:
        """The most core memories in full (the first of the core order) that fit, the
        others of them sent as lines."""
        estimate = len(self.render(layout).text)
        limit = self.max_tokens * 4
        for n_full in range(layout.n_full - 1, -1, -1):
            estimate -= len(self.full_json[n_full]) - len(self.core_line_json[n_full])
            if estimate - _ESTIMATE_SLACK > limit:
                continue  # cannot fit: skip the render
            lines = layout.n_core_lines + layout.n_full - n_full
            if result := self.fits(replace(layout, n_full=n_full, n_core_lines=lines)):
                return result
        return None

    def cut_core_lines(self, layout: _Layout) -> _Rendered | None:
        """Core lines cut from the end of the core order."""
        total = layout.n_core_lines
        return self.fewest_cuts(
            lambda n_cut: replace(layout, n_core_lines=total - n_cut),
            [len(j) for j in self.core_line_json[layout.n_full : layout.n_full + total]],
        )

    # --- the result ----------------------------------------------------------------------

    def finish(self, result: _Rendered) -> ReflectPayload:
        layout = result.layout
        payload = self.payload(layout, result.tokens)
        end = layout.n_full + layout.n_core_lines
        core_sent = dumps(payload["core_memories"]) + dumps(payload.get("core_overflow", []))
        reflect = ReflectPayload(
            payload=payload,
            text=result.text,
            tokens=result.tokens,
            bytes=len(result.text.encode()),
            max_tokens=self.max_tokens,
            core_tokens=estimate_tokens(core_sent),
            included=self.lines[: layout.n_catalog],
            cut=self.lines[layout.n_catalog :],
            cut_count=len(self.lines) - layout.n_catalog + sum(self.always_cut.values()),
            core_full=self.core[: layout.n_full],
            core_lines=self.core[layout.n_full : end],
            core_cut=self.core[end:],
            core_omitted=self.core_count - end,
            closings_shortened=sum(
                1
                for sent, closing in zip(layout.closings, self.closings, strict=True)
                if sent is not None and sent != closing.reflection
            ),
            closings_dropped=layout.closings.count(None),
            shown_ids=self.shown or {},
        )
        reflect.warnings.extend(payload_warnings(reflect))
        return reflect


_USAGE_JSON = dumps(USAGE_NOTE)


def _groups_json(groups: dict[str, list[int]], items_json: list[str]) -> str:
    """The members of a JSON object of category → list of items, from items serialised
    once (the braces are the caller's)."""
    return ",".join(
        f'"{category}":[' + ",".join(items_json[i] for i in indices) + "]"
        for category, indices in groups.items()
    )


def _nonzero(counts: dict[str, int]) -> dict[str, int]:
    return {key: n for key, n in counts.items() if n}


def _shortened(reflection: str, kept: int) -> str:
    return reflection[:kept].rstrip() + SHORTENED_MARKER


def build_reflect_payload(
    *,
    core: Iterable[CoreEntry],
    catalog: Iterable[CatalogEntry],
    omitted: dict[str, int],
    closings: Iterable[ClosingEntry],
    window_days: int | None,
    max_tokens: int,
    unlisted: dict[str, int] | None = None,
    core_unlisted: int = 0,
    shown_ids: Mapping[str, str] | None = None,
) -> ReflectPayload:
    """Assemble the payload, giving way as the module says until it fits `max_tokens`.

    `catalog` holds the lines the window admits, `omitted` the per-category counts of
    live non-core memories it left out. `unlisted` counts lines the window admits that
    the caller did not read, and `core_unlisted` core memories it did not read, because
    they come too late in their order to be sent at all: they are cut whatever happens.
    Core entries without content (too late in core order to fit in full) come after those
    with it. `shown_ids` maps whole ids to the short ids shown; without it ids are shown
    as given.
    """
    return _Builder(
        core=core,
        catalog=catalog,
        omitted=omitted,
        closings=closings,
        window_days=window_days,
        max_tokens=max_tokens,
        unlisted=unlisted,
        core_unlisted=core_unlisted,
        shown_ids=shown_ids,
    ).build()
