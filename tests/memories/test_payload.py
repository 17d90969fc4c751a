"""The reflect payload builder (SPEC §5) as a pure function: no database here."""

import copy
import json
import math
from datetime import UTC, datetime, timedelta

import pytest

from memories.jsonutil import dumps
from memories.payload import (
    USAGE_NOTE,
    CatalogEntry,
    ClosingEntry,
    CoreEntry,
    build_reflect_payload,
    catalog_note,
    estimate_tokens,
)
from memories.vocabulary import CATEGORY_ORDER as CATEGORIES

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
PAYLOAD_KEYS = [
    "status",
    "usage_note",
    "core_memories",
    "core_count",
    "catalog",
    "catalog_count",
    "catalog_omitted",
    "catalog_note",
    "recent_closings",
    "budget",
]
ZERO = dict.fromkeys(CATEGORIES, 0)


def build(*, core=(), catalog=(), omitted=None, closings=(), window_days=45, max_tokens=8000):
    return build_reflect_payload(
        core=list(core),
        catalog=list(catalog),
        omitted=omitted or {},
        closings=list(closings),
        window_days=window_days,
        max_tokens=max_tokens,
    )


def line(n: int, *, category="episodic", salience="medium", days_ago=0, gist=None, id_=None):
    return CatalogEntry(
        id=id_ or f"00000000-0000-4000-8000-{n:012d}",
        category=category,
        salience=salience,
        gist=gist or f"Catalog line number {n}",
        last_touch=NOW - timedelta(days=days_ago),
    )


def all_lines(payload) -> list[str]:
    return [text for category in CATEGORIES for text in payload["catalog"][category]]


# --- shape ----------------------------------------------------------------------------


def test_empty_store_gives_every_key_in_order_with_all_five_categories():
    result = build()
    payload = result.payload
    assert list(payload) == PAYLOAD_KEYS
    assert payload["status"] == "ok"
    assert payload["usage_note"] == USAGE_NOTE
    for key in ("core_memories", "catalog", "catalog_omitted"):
        assert list(payload[key]) == [
            "identity",
            "relationship",
            "active_thread",
            "error",
            "episodic",
        ]
    assert payload["core_count"] == 0
    assert payload["catalog_count"] == 0
    assert payload["catalog_omitted"] == ZERO
    assert payload["recent_closings"] == []
    assert list(payload["budget"]) == ["max_tokens", "tokens", "cut"]
    assert payload["budget"]["max_tokens"] == 8000
    assert payload["budget"]["cut"] == ZERO


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


def test_usage_note_explains_both_tiers_and_recall():
    for phrase in ("core_memories", "catalog", "taproot_recall", "ids", "query", "category"):
        assert phrase in USAGE_NOTE


def test_core_memories_are_slim_and_links_appear_only_when_present():
    plain = CoreEntry("a", "identity", "high", "I am Claude.", NOW)
    linked = CoreEntry("b", "relationship", "medium", "Talks with Sam.", NOW, ("x", "y"))
    payload = build(core=[plain, linked]).payload
    assert payload["core_memories"]["identity"] == [
        {
            "id": "a",
            "category": "identity",
            "salience": "high",
            "content": "I am Claude.",
            "updated_at": "2026-11-29T12:00:00Z",
        }
    ]
    assert payload["core_memories"]["relationship"][0]["linked_memories"] == ["x", "y"]
    assert list(payload["core_memories"]["relationship"][0])[-1] == "linked_memories"
    assert payload["core_count"] == 2


def test_core_memories_go_salience_high_to_low_then_newest_first():
    entries = [
        CoreEntry("low-new", "error", "low", "x", NOW),
        CoreEntry("high-old", "error", "high", "x", NOW - timedelta(days=9)),
        CoreEntry("medium", "error", "medium", "x", NOW),
        CoreEntry("high-new", "error", "high", "x", NOW - timedelta(days=1)),
    ]
    payload = build(core=entries).payload
    assert [m["id"] for m in payload["core_memories"]["error"]] == [
        "high-new",
        "high-old",
        "medium",
        "low-new",
    ]


def test_catalog_line_format_uses_the_utc_date_of_the_last_touch():
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
    assert payload["catalog"]["error"] == ["[abc] [error] [low] [2026-05-31] Mixed up the dates"]
    assert payload["catalog_count"] == 1


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
    assert [text[34:37] for text in payload["catalog"]["episodic"]] == [
        "006",
        "002",
        "004",
        "005",
        "003",
        "001",
    ]


def test_catalog_groups_lines_by_category():
    payload = build(
        catalog=[line(1, category="identity"), line(2, category="active_thread")]
    ).payload
    assert len(payload["catalog"]["identity"]) == 1
    assert len(payload["catalog"]["active_thread"]) == 1
    assert payload["catalog"]["episodic"] == []


def test_omitted_counts_and_the_note_name_the_window():
    payload = build(omitted={"episodic": 3, "error": 1}, window_days=30).payload
    assert payload["catalog_omitted"] == {**ZERO, "episodic": 3, "error": 1}
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
    assert "taproot_recall(query|category|ids)" in note
    assert note.count(".") == 1  # one sentence
    assert list(build().payload) == PAYLOAD_KEYS  # the key stays, in its place


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
        core=[CoreEntry("a", "identity_observations", "high", "x", NOW)],
        catalog=[line(1, category="project"), line(2, category="nonsense")],
        omitted={"event": 2},
    ).payload
    assert len(payload["core_memories"]["identity"]) == 1
    assert len(payload["catalog"]["active_thread"]) == 1
    assert len(payload["catalog"]["error"]) == 1
    assert payload["catalog_omitted"]["episodic"] == 2


# --- the token budget -----------------------------------------------------------------


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
    assembly written from the spec, independent of the builder's own loop)."""
    payload = copy.deepcopy(result.payload)
    restored = result.cut[0]
    category = restored.category
    payload["catalog"][category].append(restored.line())
    payload["catalog_count"] += 1
    payload["catalog_omitted"][category] -= 1
    payload["budget"]["cut"][category] -= 1
    payload["catalog_note"] = catalog_note(
        omitted=sum(omitted.values()), cut=len(result.cut) - 1, window_days=window_days
    )
    tokens = 0
    while True:
        payload["budget"]["tokens"] = tokens
        measured = estimate_tokens(dumps(payload))
        if measured == tokens:
            return dumps(payload)
        tokens = measured


@pytest.mark.parametrize("max_tokens", [1000, 1234, 1400, 1600, 1700, 1713])
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
    assert result.cut[-1].id == reverse_catalog_order(entries)[0]
    shown = all_lines(payload)
    assert payload["catalog_count"] == len(shown) == len(entries) - n_cut
    assert not any(f"[{e.id}]" in text for e in result.cut for text in shown)

    # Each cut line is counted in its category, in catalog_omitted and in budget.cut.
    cut_by_category = dict.fromkeys(CATEGORIES, 0)
    for entry in result.cut:
        cut_by_category[entry.category] += 1
    assert payload["budget"]["cut"] == cut_by_category
    assert payload["catalog_omitted"] == {
        c: cut_by_category[c] + omitted.get(c, 0) for c in CATEGORIES
    }
    assert "token budget" in payload["catalog_note"]
    assert f"{n_cut} more" in payload["catalog_note"]

    # Within budget, measured on the exact string, and minimal.
    assert result.text == dumps(payload)
    assert payload["budget"]["tokens"] == math.ceil(len(result.text) / 4) <= max_tokens
    assert estimate_tokens(with_one_cut_line_back(result, omitted, 45)) > max_tokens
    assert result.warnings == []


def test_reference_assembly_reproduces_the_builder():
    # Guards the minimality check above: with no budget pressure the reference, given
    # a payload with one line cut, must produce exactly the builder's uncut string.
    entries = mixed_catalog()
    uncut = build(catalog=entries, max_tokens=9_000)
    limit = uncut.tokens - 1
    one_cut = build(catalog=entries, max_tokens=limit)
    assert len(one_cut.cut) == 1
    restored = with_one_cut_line_back(one_cut, {}, 45)
    assert restored.replace(f'"max_tokens":{limit}', '"max_tokens":9000') == uncut.text


def test_payload_within_budget_cuts_nothing():
    entries = mixed_catalog()
    result = build(catalog=entries, max_tokens=8000)
    assert result.cut == []
    assert result.payload["budget"]["cut"] == ZERO
    assert "budget" not in result.payload["catalog_note"]


def test_core_and_closings_over_budget_are_sent_whole_with_a_warning():
    core = [CoreEntry(f"core-{i}", "identity", "high", "c" * 400, NOW) for i in range(10)]
    closings = [ClosingEntry(f"close-{i}", "r" * 400, NOW) for i in range(3)]
    result = build(core=core, catalog=mixed_catalog(), closings=closings, max_tokens=1000)
    payload = result.payload
    assert len(payload["core_memories"]["identity"]) == 10
    assert all(m["content"] == "c" * 400 for m in payload["core_memories"]["identity"])
    assert len(payload["recent_closings"]) == 3
    assert payload["catalog_count"] == 0
    assert len(result.cut) == len(mixed_catalog())
    assert result.tokens > 1000
    assert result.tokens == math.ceil(len(result.text) / 4)
    assert any("budget" in w and "whole" in w for w in result.warnings)


def test_core_alone_past_half_the_budget_warns():
    core = [CoreEntry("a", "identity", "high", "c" * 2400, NOW)]
    result = build(core=core, max_tokens=1000)
    assert result.core_tokens > 500
    assert any("half" in w for w in result.warnings)
    quiet = build(core=[CoreEntry("a", "identity", "high", "c" * 100, NOW)], max_tokens=1000)
    assert quiet.warnings == []


def test_tokens_settle_when_the_count_gains_a_digit():
    # Grow the catalog until the estimate crosses 1,000 tokens: the string must still
    # report its own size exactly.
    for n in range(20, 40):
        result = build(catalog=[line(i) for i in range(n)], max_tokens=99_999)
        assert result.tokens == math.ceil(len(result.text) / 4)
