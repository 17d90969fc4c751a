"""The reflect payload builder (SPEC §5 and the context-economy issue) as a pure function:
no database here."""

import copy
import json
import math
import random
from collections import Counter
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memories.jsonutil import dumps
from memories.payload import (
    GIVES_WAY,
    GivesWay,
    _Builder,
    _Layout,
    build_reflect_payload,
    catalog_read_room,
)
from memories.payload_entries import (
    CLOSING_MIN_CHARS,
    SHORTENED_MARKER,
    USAGE_NOTE,
    CatalogEntry,
    ClosingEntry,
    CoreEntry,
    catalog_headings,
    catalog_note,
    catalog_order,
    core_chars,
    core_content_fits,
    could_fit,
    estimate_tokens,
    line_chars,
)
from memories.vocabulary import CATEGORY_ORDER as CATEGORIES

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
EMPTY_PAYLOAD_KEYS = [
    "status",
    "usage_note",
    "core_memories",
    "core_count",
    "catalog",
    "catalog_count",
    "catalog_note",
    "budget",
]
EVERY_KEY = [
    "status",
    "usage_note",
    "core_memories",
    "core_count",
    "core_overflow",
    "core_omitted",
    "catalog",
    "catalog_count",
    "catalog_omitted",
    "catalog_note",
    "recent_closings",
    "budget",
]


def build(
    *,
    core=(),
    catalog=(),
    omitted=None,
    closings=(),
    window_days=45,
    max_tokens=8000,
    shown_ids=None,
    **extra,
):
    return build_reflect_payload(
        core=list(core),
        catalog=list(catalog),
        omitted=omitted or {},
        closings=list(closings),
        window_days=window_days,
        max_tokens=max_tokens,
        shown_ids=shown_ids,
        **extra,
    )


def line(n: int, *, category="episodic", salience="medium", days_ago=0, gist=None, id_=None):
    return CatalogEntry(
        id=id_ or f"00000000-0000-4000-8000-{n:012d}",
        category=category,
        salience=salience,
        gist=gist or f"Catalog line number {n}",
        last_touch=NOW - timedelta(days=days_ago),
    )


UNSET = object()


def core_entry(
    n: int, *, category="identity", salience="high", days_ago=0, content=UNSET, gist=None, **extra
):
    moment = NOW - timedelta(days=days_ago)
    return CoreEntry(
        id=f"c0000000-0000-4000-8000-{n:012d}",
        category=category,
        salience=salience,
        gist=gist or f"Core gist {n}",
        updated_at=moment,
        last_touch=moment,
        content=f"Core memory number {n}, in full." if content is UNSET else content,
        **extra,
    )


def lines_of(items: list[str]) -> list[str]:
    """Catalog items without the month headings."""
    return [text for text in items if text.startswith("[")]


def all_lines(payload) -> list[str]:
    return [
        text for category in CATEGORIES for text in lines_of(payload["catalog"].get(category, []))
    ]


# --- shape ----------------------------------------------------------------------------


def test_empty_store_leaves_out_empty_lists_and_zero_counts():
    result = build()
    payload = result.payload
    assert list(payload) == EMPTY_PAYLOAD_KEYS
    assert payload["status"] == "ok"
    assert payload["usage_note"] == USAGE_NOTE
    assert payload["core_memories"] == {}
    assert payload["catalog"] == {}
    assert payload["core_count"] == 0
    assert payload["catalog_count"] == 0
    assert payload["budget"] == {"max_tokens": 8000, "tokens": result.tokens}


def test_every_key_when_everything_is_there_comes_in_order():
    result = build(
        # One core memory in full, one too late in core order to fit in full, two never read.
        core=[core_entry(1), core_entry(2, content=None)],
        core_unlisted=2,
        catalog=[line(1)],
        unlisted={"episodic": 1},
        omitted={"error": 2},
        closings=[ClosingEntry("k1", "A closing.", NOW)],
    )
    assert list(result.payload) == EVERY_KEY
    assert list(result.payload["budget"]) == ["max_tokens", "tokens", "cut"]
    assert result.payload["core_count"] == 4
    assert result.payload["core_omitted"] == 2


def test_text_is_the_compact_json_of_the_payload_and_tokens_measure_it():
    result = build(catalog=[line(1)], closings=[ClosingEntry("c1", "Bye — à bientôt", NOW)])
    assert result.text == dumps(result.payload)
    assert json.loads(result.text) == result.payload
    assert ", " not in result.text.replace(USAGE_NOTE, "")  # compact separators
    assert "à bientôt" in result.text  # not escaped
    assert result.payload["budget"]["tokens"] == math.ceil(len(result.text) / 4)
    assert result.tokens == result.payload["budget"]["tokens"]
    assert result.bytes == len(result.text.encode("utf-8"))
    assert result.bytes > len(result.text)
    assert result.kilobytes == round(result.bytes / 1024, 1)


def test_usage_note_says_how_to_read_a_line_in_one_sentence():
    assert USAGE_NOTE.count(". ") == 0 and USAGE_NOTE.endswith(".")
    for phrase in (
        "[id] gist",
        "[high]",
        "month",
        "(2026-11:)",
        "core_overflow",
        "taproot_recall(ids",
        "taproot_recall(query",
    ):
        assert phrase in USAGE_NOTE


def test_core_memories_are_slim_without_their_category_and_links_only_when_present():
    plain = core_entry(1, content="I am Claude.")
    linked = core_entry(
        2, category="relationship", salience="medium", content="Talks with Sam.",
        linked_memories=("x", "y"),
    )  # fmt: skip
    payload = build(core=[plain, linked]).payload
    assert payload["core_memories"]["identity"] == [
        {
            "id": plain.id,
            "salience": "high",
            "content": "I am Claude.",
            "updated_at": "2026-11-29T12:00:00Z",
        }
    ]
    assert payload["core_memories"]["relationship"][0]["linked_memories"] == ["x", "y"]
    assert list(payload["core_memories"]["relationship"][0])[-1] == "linked_memories"
    assert list(payload["core_memories"]) == ["identity", "relationship"]  # no empty ones
    assert payload["core_count"] == 2


def test_ids_and_links_are_shown_as_the_short_ids_given():
    memory = core_entry(1, linked_memories=("abcdef12-0000-4000-8000-000000000000",))
    catalog = line(7)
    shown = {memory.id: "c0000000", catalog.id: "00000000-0", memory.linked_memories[0]: "abcdef12"}
    payload = build(core=[memory], catalog=[catalog], shown_ids=shown).payload
    sent = payload["core_memories"]["identity"][0]
    assert (sent["id"], sent["linked_memories"]) == ("c0000000", ["abcdef12"])
    assert payload["catalog"]["episodic"] == ["2026-11:", "[00000000-0] Catalog line number 7"]


def test_core_memories_go_salience_high_to_low_then_newest_first():
    entries = [
        core_entry(1, category="error", salience="low"),
        core_entry(2, category="error", salience="high", days_ago=9),
        core_entry(3, category="error", salience="medium"),
        core_entry(4, category="error", salience="high", days_ago=1),
    ]
    payload = build(core=entries).payload
    assert [m["id"] for m in payload["core_memories"]["error"]] == [
        entries[3].id,
        entries[1].id,
        entries[2].id,
        entries[0].id,
    ]


def test_catalog_line_is_id_and_gist_under_the_utc_month_of_its_last_touch():
    from zoneinfo import ZoneInfo

    entry = CatalogEntry(
        id="abc",
        category="error",
        salience="low",
        gist="Mixed up  the\ndates",
        # 00:30 in Lisbon on 1 June is 23:30 UTC on 31 May.
        last_touch=datetime(2026, 6, 1, 0, 30, tzinfo=ZoneInfo("Europe/Lisbon")),
    )
    payload = build(catalog=[entry]).payload
    assert payload["catalog"] == {"error": ["2026-05:", "[abc] Mixed up the dates"]}
    assert payload["catalog_count"] == 1


def test_only_high_salience_is_marked_and_a_month_heads_its_run_of_lines():
    entries = [
        line(1, salience="high", days_ago=40),
        line(2, salience="medium", days_ago=1),
        line(3, salience="low", days_ago=3),
        line(4, salience="medium", days_ago=60),
        line(5, salience="low", days_ago=0, category="error"),
        line(6, salience="low", days_ago=4),
    ]
    payload = build(catalog=entries).payload
    # In catalog order (high, then newest first within each salience), a month heading
    # wherever a category's month changes, so the same month may head two runs.
    assert payload["catalog"] == {
        "episodic": [
            "2026-10:",
            f"[{entries[0].id}] [high] Catalog line number 1",
            "2026-11:",
            f"[{entries[1].id}] Catalog line number 2",
            "2026-09:",
            f"[{entries[3].id}] Catalog line number 4",
            "2026-11:",
            f"[{entries[2].id}] Catalog line number 3",
            f"[{entries[5].id}] Catalog line number 6",
        ],
        "error": ["2026-11:", f"[{entries[4].id}] Catalog line number 5"],
    }
    assert payload["catalog_count"] == 6
    assert catalog_headings(sorted(entries, key=catalog_order)) == [
        "2026-10:", "2026-11:", "2026-09:", "2026-11:", "2026-11:", None
    ]  # fmt: skip


def test_catalog_orders_salience_then_last_touch_newest_then_id():
    entries = [
        line(1, salience="low", days_ago=0),
        line(2, salience="high", days_ago=30),
        line(3, salience="medium", days_ago=5),
        line(5, salience="medium", days_ago=1),
        line(4, salience="medium", days_ago=1),
        line(6, salience="high", days_ago=2),
    ]
    payload = build(catalog=entries).payload
    assert [text[34:37] for text in lines_of(payload["catalog"]["episodic"])] == [
        "006",
        "002",
        "004",
        "005",
        "003",
        "001",
    ]


def test_catalog_groups_lines_by_category_and_leaves_out_empty_ones():
    payload = build(
        catalog=[line(1, category="identity"), line(2, category="active_thread")]
    ).payload
    assert list(payload["catalog"]) == ["identity", "active_thread"]


def test_omitted_counts_only_the_categories_that_have_some_and_the_note_names_the_window():
    payload = build(omitted={"episodic": 3, "error": 1, "identity": 0}, window_days=30).payload
    assert payload["catalog_omitted"] == {"error": 1, "episodic": 3}
    note = payload["catalog_note"]
    assert "4 memories" in note
    assert "30 days" in note
    assert "taproot_recall" in note
    assert "budget" not in note


def test_catalog_note_reads_well_for_one_and_for_cuts():
    assert catalog_note(omitted=1, cut=0, window_days=45).startswith("1 memory is not listed")
    both = catalog_note(omitted=3, cut=2, window_days=45)
    assert both.startswith("3 memories are not listed: lower-salience")
    assert "2 more were left out" in both and "token budget" in both
    only_cut = catalog_note(omitted=0, cut=2, window_days=45)
    assert only_cut.startswith("2 memories are not listed: left out to keep this payload")
    assert "45 days" not in only_cut
    for note in (both, only_cut):
        assert note.count(".") == 1  # one sentence
        assert note.endswith("all stay reachable with taproot_recall(query|category|ids).")


def test_catalog_note_speaks_of_no_left_out_memories_when_none_is():
    note = build(catalog=mixed_catalog()).payload["catalog_note"]
    assert note == catalog_note(omitted=0, cut=0, window_days=45)
    assert not any(word in note for word in ("0 memories", "not listed", "left out", "days"))
    assert note.startswith("Every memory is listed")


def test_closings_show_the_title_only_when_set_and_keep_their_order():
    closings = [
        ClosingEntry("c3", "Third", NOW, "Planning the trip"),
        ClosingEntry("c2", "Second", NOW - timedelta(days=1)),
        ClosingEntry("c1", "First", NOW - timedelta(days=2), ""),
    ]
    assert build(closings=closings).payload["recent_closings"] == [
        {
            "id": "c3",
            "conversation_title": "Planning the trip",
            "reflection": "Third",
            "created_at": "2026-11-29T12:00:00Z",
        },
        {"id": "c2", "reflection": "Second", "created_at": "2026-11-28T12:00:00Z"},
        {"id": "c1", "reflection": "First", "created_at": "2026-11-27T12:00:00Z"},
    ]


def test_drifted_categories_are_shown_where_migrate_would_put_them():
    payload = build(
        core=[core_entry(1, category="identity_observations")],
        catalog=[line(1, category="project"), line(2, category="nonsense")],
        omitted={"event": 2},
    ).payload
    assert len(payload["core_memories"]["identity"]) == 1
    assert len(lines_of(payload["catalog"]["active_thread"])) == 1
    assert len(lines_of(payload["catalog"]["error"])) == 1
    assert payload["catalog_omitted"] == {"episodic": 2}


def test_more_catalog_lines_per_token_than_the_old_lines_with_whole_ids_and_categories():
    entry = line(1, category="relationship", gist="Calls on Sunday evenings are for family")
    lean = entry.line("a002ab76")
    assert lean == "[a002ab76] Calls on Sunday evenings are for family"
    old = f"[{entry.id}] [relationship] [medium] [2026-11-29] {entry.gist}"
    assert len(old) / len(lean) > 1.5


# --- the token budget: catalog lines -------------------------------------------------


def mixed_catalog() -> list[CatalogEntry]:
    """Lines across categories, with ties on salience and last touch broken by id."""
    entries = []
    n = 0
    for category in CATEGORIES:
        for salience in ("high", "medium", "low"):
            for days_ago in (1, 20):
                for _ in range(2):
                    n += 1
                    entries.append(line(n, category=category, salience=salience, days_ago=days_ago))
    return entries


def reverse_catalog_order(entries: list[CatalogEntry]) -> list[str]:
    """The order the spec cuts in: salience low→high, oldest first, id descending."""
    rank = {"high": 0, "medium": 1, "low": 2}
    by_id = sorted(entries, key=lambda e: e.id, reverse=True)
    by_touch = sorted(by_id, key=lambda e: e.last_touch)
    return [e.id for e in sorted(by_touch, key=lambda e: -rank[e.salience])]


def with_one_cut_line_back(result, omitted: dict[str, int], window_days: int) -> str:
    """The payload the builder would have sent with one line fewer cut (a reference
    assembly written from the spec, independent of the builder's own layouts)."""
    payload = copy.deepcopy(result.payload)
    restored = result.cut[0]
    category = restored.category
    grouped = payload["catalog"]
    before = [e for e in result.included if e.category == category]
    if not before or before[-1].heading() != restored.heading():
        grouped.setdefault(category, []).append(restored.heading())
    grouped.setdefault(category, []).append(restored.line())
    payload["catalog"] = {c: grouped[c] for c in CATEGORIES if c in grouped}
    payload["catalog_count"] += 1
    omitted_now = payload["catalog_omitted"]
    omitted_now[category] -= 1
    payload["catalog_omitted"] = {c: n for c, n in omitted_now.items() if n}
    if not payload["catalog_omitted"]:
        del payload["catalog_omitted"]
    cut = payload["budget"]["cut"]
    cut[category] -= 1
    payload["budget"]["cut"] = {c: n for c, n in cut.items() if n}
    if not payload["budget"]["cut"]:
        del payload["budget"]["cut"]
    payload["catalog_note"] = catalog_note(
        omitted=sum(omitted.values()), cut=len(result.cut) - 1, window_days=window_days
    )
    if "catalog_omitted" not in payload:  # keep the key order of the builder
        payload = {k: payload[k] for k in EVERY_KEY if k in payload}
    tokens = 0
    while True:
        payload["budget"]["tokens"] = tokens
        measured = estimate_tokens(dumps(payload))
        if measured == tokens:
            return dumps(payload)
        tokens = measured


@pytest.mark.parametrize("max_tokens", [500, 600, 777, 900, 1000])
def test_budget_cuts_lines_in_reverse_catalog_order_just_enough(max_tokens):
    entries = mixed_catalog()
    omitted = {"episodic": 4}
    full = build(catalog=entries, omitted=omitted, max_tokens=9_999)
    assert full.cut == []
    assert full.tokens > max_tokens
    result = build(catalog=entries, omitted=omitted, max_tokens=max_tokens)
    payload = result.payload
    n_cut = len(result.cut)
    assert 0 < n_cut < len(entries)

    # The cut lines are the tail of the catalog order, across all categories.
    assert [e.id for e in result.cut][::-1] == reverse_catalog_order(entries)[:n_cut]
    shown = all_lines(payload)
    assert payload["catalog_count"] == len(shown) == len(entries) - n_cut
    assert not any(f"[{e.id}]" in text for e in result.cut for text in shown)

    # Each cut line is counted in its category, in catalog_omitted and in budget.cut.
    cut_by_category = dict.fromkeys(CATEGORIES, 0)
    for entry in result.cut:
        cut_by_category[entry.category] += 1
    assert payload["budget"]["cut"] == {c: n for c, n in cut_by_category.items() if n}
    assert payload["catalog_omitted"] == {
        c: cut_by_category[c] + omitted.get(c, 0)
        for c in CATEGORIES
        if cut_by_category[c] + omitted.get(c, 0)
    }
    assert f"{n_cut} more" in payload["catalog_note"]

    # Within budget, measured on the exact string, and minimal.
    assert result.text == dumps(payload)
    assert payload["budget"]["tokens"] == math.ceil(len(result.text) / 4) <= max_tokens
    assert estimate_tokens(with_one_cut_line_back(result, omitted, 45)) > max_tokens
    assert result.warnings == []


def test_reference_assembly_reproduces_the_builder():
    # Guards the minimality check above: the reference, given a payload with some lines
    # cut, must produce exactly the builder's payload with one line fewer cut.
    entries = mixed_catalog()
    result = build(catalog=entries, omitted={"episodic": 4}, max_tokens=800)
    n_cut = len(result.cut)
    assert n_cut >= 2
    builder = _Builder(
        core=[],
        catalog=entries,
        omitted={"episodic": 4},
        closings=[],
        window_days=45,
        max_tokens=800,
        unlisted=None,
        core_unlisted=0,
        shown_ids=None,
    )
    one_fewer = builder.render(_Layout(0, 0, (), len(entries) - n_cut + 1))
    assert with_one_cut_line_back(result, {"episodic": 4}, 45) == one_fewer.text


def test_payload_within_budget_cuts_nothing():
    result = build(catalog=mixed_catalog(), max_tokens=8000)
    assert result.cut == []
    assert "cut" not in result.payload["budget"]
    assert "budget" not in result.payload["catalog_note"]


# --- the token budget: closings, then core --------------------------------------------


def builder_for(*, core=(), catalog=(), closings=(), max_tokens=2000) -> _Builder:
    """The builder's own layouts, to check that one step less giving way would not fit."""
    return _Builder(
        core=core,
        catalog=catalog,
        omitted={},
        closings=closings,
        window_days=45,
        max_tokens=max_tokens,
        unlisted=None,
        core_unlisted=0,
        shown_ids=None,
    )


def closings_of(length: int, count: int = 3) -> list[ClosingEntry]:
    return [
        ClosingEntry(f"close-{i}", f"{i}" * length, NOW - timedelta(days=i)) for i in range(count)
    ]


def test_closings_give_way_after_every_catalog_line_oldest_first_shortened_then_left_out():
    closings = closings_of(2000)
    whole = build(closings=closings, max_tokens=9_000)
    assert whole.tokens > 1600
    result = build(catalog=mixed_catalog(), closings=closings, max_tokens=1600)
    sent = result.payload["recent_closings"]
    assert result.payload["catalog_count"] == 0
    assert result.tokens <= 1600
    # The newest two whole, the oldest shortened with the marker, as little as fits.
    assert [c["id"] for c in sent] == ["close-0", "close-1", "close-2"]
    assert [c["reflection"] for c in sent[:2]] == ["0" * 2000, "1" * 2000]
    assert sent[2]["reflection"].endswith(SHORTENED_MARKER)
    kept = len(sent[2]["reflection"]) - len(SHORTENED_MARKER)
    assert CLOSING_MIN_CHARS <= kept < 2000
    # As little as fits: one more character of it does not.
    builder = builder_for(catalog=mixed_catalog(), closings=closings, max_tokens=1600)
    longer = ("0" * 2000, "1" * 2000, "2" * (kept + 1) + SHORTENED_MARKER)
    assert builder.fits(_Layout(0, 0, longer, 0)) is None
    assert (result.closings_shortened, result.closings_dropped) == (1, 0)
    assert any("shortened" in w for w in result.warnings)


def test_a_closing_that_would_need_shortening_below_the_floor_is_left_out():
    closings = closings_of(2000)
    result = build(closings=closings, max_tokens=1050)
    sent = result.payload["recent_closings"]
    assert [c["id"] for c in sent] == ["close-0", "close-1"]
    assert sent[1]["reflection"].endswith(SHORTENED_MARKER)
    assert (result.closings_shortened, result.closings_dropped) == (1, 1)
    assert result.tokens <= 1050


def test_core_memories_that_do_not_fit_in_full_become_lines_in_core_order():
    core = [core_entry(i, salience="medium", days_ago=i, content="w" * 500) for i in range(20)]
    result = build(core=core, catalog=mixed_catalog(), closings=closings_of(50), max_tokens=2000)
    payload = result.payload
    assert result.tokens <= 2000
    assert payload["catalog_count"] == 0
    assert "recent_closings" not in payload
    n_full = len(result.core_full)
    assert 0 < n_full < 20
    order = sorted(core, key=catalog_order)
    assert [e.id for e in result.core_full] == [e.id for e in order[:n_full]]
    assert payload["core_overflow"] == [e.line() for e in order[n_full:]]
    assert payload["core_overflow"][0] == f"[{order[n_full].id}] [identity] {order[n_full].gist}"
    assert "core_omitted" not in payload
    assert payload["core_count"] == 20
    # The most that fit: one more in full does not.
    builder = builder_for(core=core, catalog=mixed_catalog(), closings=closings_of(50))
    assert builder.fits(_Layout(n_full + 1, 19 - n_full, (None,) * 3, 0)) is None
    warning = result.warnings[0]
    assert f"{20 - n_full} of the 20 core memories do not fit in full" in warning
    assert "Demote" in warning


def test_core_lines_that_do_not_fit_are_cut_from_the_end_and_counted():
    core = [core_entry(i, days_ago=i, gist="g" * 200, content="w" * 900) for i in range(60)]
    result = build(core=core, max_tokens=2000)
    payload = result.payload
    assert result.tokens <= 2000
    assert payload["core_memories"] == {}
    order = sorted(core, key=catalog_order)
    shown = payload["core_overflow"]
    assert shown == [e.line() for e in order[: len(shown)]]
    assert payload["core_omitted"] == 60 - len(shown) > 0
    assert result.core_omitted == payload["core_omitted"]
    assert f"{payload['core_omitted']} are left out (core_omitted)" in result.warnings[0]
    # Just enough cut: one more line does not fit.
    builder = builder_for(core=core)
    assert builder.fits(_Layout(0, len(shown) + 1, (), 0)) is None


def test_core_never_read_is_counted_in_core_count_and_core_omitted():
    core = [core_entry(i, content=None) for i in range(3)]  # too late to fit in full
    result = build(core=core, core_unlisted=7)
    assert result.payload["core_count"] == 10
    assert len(result.payload["core_overflow"]) == 3
    assert result.payload["core_omitted"] == 7


def test_core_alone_past_half_the_budget_warns():
    core = [core_entry(1, content="c" * 5000)]
    result = build(core=core, max_tokens=2000)
    assert result.core_tokens > 1000
    assert any("half" in w for w in result.warnings)
    quiet = build(core=[core_entry(1, content="c" * 100)], max_tokens=2000)
    assert quiet.warnings == []


def test_tokens_settle_when_the_count_gains_a_digit():
    # Grow the catalog until the estimate crosses 1,000 tokens: the string must still
    # report its own size exactly.
    for n in range(60, 90):
        result = build(catalog=[line(i) for i in range(n)], max_tokens=99_999)
        assert result.tokens == math.ceil(len(result.text) / 4)


# --- the budget holds for any store and budget ----------------------------------------

texts = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=40)
SALIENCES = ["high", "medium", "low", "3"]
CATEGORY_NAMES = [*CATEGORIES, "project", "nonsense"]
categories = st.sampled_from(CATEGORY_NAMES)


@st.composite
def stores(draw):
    """Stores of every shape: core-heavy, closing-heavy, catalog-heavy, or all three. The
    shape and a handful of texts are drawn; each entry takes its fields from them through a
    random the draw seeds, since drawing every field of up to 550 entries one by one spent
    four fifths of the test in generating data."""
    rnd = random.Random(draw(st.integers(min_value=0, max_value=2**32 - 1)))
    some_texts = draw(st.lists(texts, min_size=1, max_size=8))

    def text() -> str:
        return rnd.choice(some_texts)

    def long_text() -> str:
        return "word " * (rnd.choice([0, 3000, rnd.randint(0, 3000)]) // 5)

    def days_ago() -> datetime:
        return NOW - timedelta(days=rnd.randint(0, 400))

    n_core = draw(st.sampled_from([0, 1, 5, 40, 150]))
    core = [
        CoreEntry(
            id=f"c{i:07d}-0000-4000-8000-000000000000",
            category=rnd.choice(CATEGORY_NAMES),
            salience=rnd.choice(SALIENCES),
            gist=text(),
            updated_at=days_ago(),
            last_touch=days_ago(),
            content=text() + long_text(),
            linked_memories=("x" * 36,) * rnd.randint(0, 2),
        )
        for i in range(n_core)
    ]
    n_lines = draw(st.sampled_from([0, 3, 60, 400]))
    catalog = [
        CatalogEntry(
            id=f"a{i:07d}-0000-4000-8000-000000000000",
            category=rnd.choice(CATEGORY_NAMES),
            salience=rnd.choice(SALIENCES),
            gist=text(),
            last_touch=days_ago(),
        )
        for i in range(n_lines)
    ]
    closings = [
        ClosingEntry(f"k{i}", text() + long_text(), NOW - timedelta(days=i), text())
        for i in range(draw(st.integers(min_value=0, max_value=3)))
    ]
    return core, catalog, closings


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(store=stores(), max_tokens=st.integers(min_value=2000, max_value=12_000))
def test_the_payload_never_exceeds_its_budget_and_gives_way_in_order(store, max_tokens):
    core, catalog, closings = store
    result = build(
        core=core, catalog=catalog, closings=closings, max_tokens=max_tokens, unlisted={"x": 3}
    )
    payload = result.payload
    assert result.tokens <= max_tokens
    assert result.text == dumps(payload)
    assert result.tokens == payload["budget"]["tokens"] == math.ceil(len(result.text) / 4)

    # What was sent is a prefix of each order.
    assert result.included == sorted(catalog, key=catalog_order)[: payload["catalog_count"]]
    order = sorted(core, key=catalog_order)
    n_full, n_lines = len(result.core_full), len(result.core_lines)
    assert result.core_full + result.core_lines == order[: n_full + n_lines]
    assert payload.get("core_overflow", []) == [e.line() for e in result.core_lines]
    assert payload["core_count"] == len(core)
    assert payload.get("core_omitted", 0) == len(core) - n_full - n_lines

    # Each thing gives way only once everything before it has.
    closings_touched = result.closings_shortened or result.closings_dropped
    if closings_touched:
        assert payload["catalog_count"] == 0
    could_fit = core_content_fits((len(e.content) for e in order), max_tokens)
    if n_full < could_fit:
        assert payload["catalog_count"] == 0
        assert result.closings_dropped == len(closings)
    if n_full + n_lines < len(core):
        assert n_full == 0
    if not closings_touched:
        assert [c["reflection"] for c in payload.get("recent_closings", [])] == [
            c.reflection for c in closings
        ]


def bounded_read(core, catalog, closings, max_tokens):
    """What memories.services.reflect reads of a store: the core memories that could be sent,
    the text of those that could fit in full, the catalog lines that could fit the room
    catalog_read_room leaves them; the rest only counted."""
    core = sorted(core, key=catalog_order)
    read_core = list(could_fit(core, lambda e: core_chars(len(e.content), e.gist), max_tokens * 4))
    n_full = core_content_fits((len(e.content) for e in read_core), max_tokens)
    room = catalog_read_room(
        max_tokens=max_tokens,
        core=[(len(e.content), e.gist) for e in read_core],
        n_full=n_full,
        closings=[c.reflection for c in closings],
    )
    lines = sorted(catalog, key=catalog_order)
    read_lines = list(could_fit(lines, lambda e: line_chars(e.gist), room))
    return {
        "core": [e if i < n_full else replace(e, content=None) for i, e in enumerate(read_core)],
        "core_unlisted": len(core) - len(read_core),
        "catalog": read_lines,
        "unlisted": dict(Counter(e.category for e in lines[len(read_lines) :])),
    }


ORDERS = [
    GIVES_WAY,
    # Any other order reads correctly too: the bound derives from the declared one.
    (GivesWay.CLOSINGS, GivesWay.CATALOG_LINES, GivesWay.CORE_IN_FULL, GivesWay.CORE_LINES),
    (GivesWay.CORE_IN_FULL, GivesWay.CATALOG_LINES, GivesWay.CLOSINGS, GivesWay.CORE_LINES),
    (GivesWay.CORE_IN_FULL, GivesWay.CORE_LINES, GivesWay.CLOSINGS, GivesWay.CATALOG_LINES),
]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    store=stores(),
    max_tokens=st.integers(min_value=2000, max_value=12_000),
    omitted=st.dictionaries(categories, st.integers(min_value=1, max_value=50), max_size=2),
    order=st.sampled_from(ORDERS),
)
def test_reading_only_what_could_be_sent_sends_what_a_full_read_sends(
    store, max_tokens, omitted, order
):
    core, catalog, closings = store
    with mock.patch("memories.payload.GIVES_WAY", order):
        full = build(
            core=core, catalog=catalog, omitted=omitted, closings=closings, max_tokens=max_tokens
        )
        bounded = build(
            closings=closings,
            omitted=omitted,
            max_tokens=max_tokens,
            **bounded_read(core, catalog, closings, max_tokens),
        )
    assert bounded.text == full.text
    assert bounded.cut_count == full.cut_count
    assert bounded.core_omitted == full.core_omitted


def test_the_declared_order_is_the_one_the_payload_gives_way_in():
    assert GIVES_WAY == (
        GivesWay.CATALOG_LINES,
        GivesWay.CLOSINGS,
        GivesWay.CORE_IN_FULL,
        GivesWay.CORE_LINES,
    )
