import json
import math
from datetime import timedelta

import pytest
from django.test import override_settings

from memories.jsonutil import dumps
from memories.models import Closing, Memory
from memories.services import reflect
from memories.vocabulary import CATEGORY_ORDER as CATEGORIES
from tests.conftest import NOW

pytestmark = pytest.mark.django_db

WINDOW = timedelta(days=45)
MICROSECOND = timedelta(microseconds=1)


def shown(memory) -> str:
    """A memory's id as the payload shows it when no other id shares its first 8 characters."""
    return str(memory.pk)[:8]


def line_id(text: str) -> str:
    return text[1 : text.index("]")]


def catalog_lines(items: list[str]) -> list[str]:
    """A category's catalog items without the month headings."""
    return [text for text in items if text.startswith("[")]


def catalog_ids(result) -> list[str]:
    catalog = result.payload["catalog"]
    return [
        line_id(text)
        for category in CATEGORIES
        for text in catalog_lines(catalog.get(category, []))
    ]


def test_reflect_returns_the_exact_text_it_describes(user, make_memory):
    make_memory(core=True, category="identity", content="I am Claude.")
    make_memory(gist="Recent note")
    result = reflect(owner=user, now=NOW)
    assert result.text == dumps(result.payload)
    assert json.loads(result.text)["status"] == "ok"
    assert result.payload["budget"]["tokens"] == math.ceil(len(result.text) / 4)
    assert result.payload["budget"]["max_tokens"] == 8000


def test_core_memories_are_listed_in_full_by_category_and_not_in_the_catalog(user, make_memory):
    identity = make_memory(core=True, category="identity", content="I am Claude.", salience="low")
    error = make_memory(
        core=True, category="error", content="Never guess dates.", linked_memories=["x"]
    )
    old_core = make_memory(core=True, category="episodic", updated_at=NOW - timedelta(days=900))
    payload = reflect(owner=user, now=NOW).payload
    assert payload["core_count"] == 3
    assert payload["core_memories"]["identity"] == [
        {
            "id": shown(identity),
            "salience": "low",
            "content": "I am Claude.",
            "updated_at": "2026-11-29T12:00:00Z",
        }
    ]
    assert payload["core_memories"]["error"][0]["linked_memories"] == ["x"]
    assert payload["core_memories"]["error"][0]["id"] == shown(error)
    assert payload["core_memories"]["episodic"][0]["id"] == shown(old_core)
    assert payload["catalog_count"] == 0
    assert "catalog_omitted" not in payload


@override_settings(CATALOG_WINDOW_DAYS=45)
def test_the_window_is_inclusive_at_exactly_45_days(user, make_memory):
    edge = make_memory(updated_at=NOW - WINDOW, gist="Edge")
    make_memory(updated_at=NOW - WINDOW - MICROSECOND, gist="Just outside")
    result = reflect(owner=user, now=NOW)
    assert catalog_ids(result) == [shown(edge)]
    assert result.payload["catalog"]["episodic"] == ["2026-10:", f"[{shown(edge)}] Edge"]
    assert result.payload["catalog_omitted"] == {"episodic": 1}


def test_a_recent_retrieval_keeps_an_old_memory_in_the_window_and_sets_its_date(user, make_memory):
    memory = make_memory(
        updated_at=NOW - timedelta(days=300),
        last_retrieved=NOW - timedelta(days=3),
        retrieval_count=1,
        gist="Retrieved lately",
    )
    result = reflect(owner=user, now=NOW)
    assert result.payload["catalog"]["episodic"] == [
        "2026-11:",
        f"[{shown(memory)}] Retrieved lately",
    ]


@override_settings(CATALOG_WINDOW_DAYS=45)
def test_high_salience_is_always_listed(user, make_memory):
    old_high = make_memory(salience="high", updated_at=NOW - timedelta(days=4000))
    make_memory(salience="medium", updated_at=NOW - timedelta(days=46))
    make_memory(salience="low", updated_at=NOW - timedelta(days=46))
    result = reflect(owner=user, now=NOW)
    assert catalog_ids(result) == [shown(old_high)]
    assert result.payload["catalog_omitted"]["episodic"] == 2


@override_settings(CATALOG_WINDOW_DAYS=45)
def test_catalog_order_and_omitted_counts_per_category(user, make_memory):
    old = NOW - timedelta(days=60)
    a = make_memory(category="identity", salience="medium", updated_at=NOW - timedelta(days=2))
    b = make_memory(category="identity", salience="high", updated_at=NOW - timedelta(days=10))
    c = make_memory(category="identity", salience="medium", updated_at=NOW - timedelta(days=1))
    make_memory(category="identity", updated_at=old)
    make_memory(category="error", updated_at=old)
    make_memory(category="error", updated_at=old, salience="low")
    make_memory(category="relationship", updated_at=old)
    payload = reflect(owner=user, now=NOW).payload
    assert [line_id(text) for text in catalog_lines(payload["catalog"]["identity"])] == [
        shown(b),
        shown(c),
        shown(a),
    ]
    assert payload["catalog_count"] == 3
    assert payload["catalog_omitted"] == {"identity": 1, "relationship": 1, "error": 2}
    assert "4 memories" in payload["catalog_note"]
    assert "45 days" in payload["catalog_note"]


def test_archived_memories_appear_nowhere_and_in_no_count(user, make_memory):
    gone = {"archived_at": NOW, "archive_reason": "old"}
    make_memory(core=True, category="identity", **gone)
    make_memory(salience="high", **gone)
    make_memory(updated_at=NOW - timedelta(days=90), **gone)
    result = reflect(owner=user, now=NOW)
    payload = result.payload
    assert payload["core_count"] == 0
    assert payload["catalog_count"] == 0
    assert "catalog_omitted" not in payload
    assert payload["core_memories"] == {}
    assert payload["catalog_note"].startswith("Every memory is listed")
    for memory in Memory.objects.all():
        assert shown(memory) not in result.text


def test_recent_closings_are_the_three_newest_with_titles_only_when_set(user, other_user):
    for days, title in ((5, "Oldest"), (4, None), (3, "Middle"), (2, ""), (1, "Newest")):
        Closing.objects.create(
            owner=user,
            reflection=f"Reflection {days}",
            conversation_title=title,
            created_at=NOW - timedelta(days=days),
        )
    Closing.objects.create(owner=other_user, reflection="Not yours", created_at=NOW)
    closings = reflect(owner=user, now=NOW).payload["recent_closings"]
    assert [c["reflection"] for c in closings] == ["Reflection 1", "Reflection 2", "Reflection 3"]
    assert closings[0]["conversation_title"] == "Newest"
    assert "conversation_title" not in closings[1]
    assert list(closings[0]) == ["id", "conversation_title", "reflection", "created_at"]
    assert list(closings[1]) == ["id", "reflection", "created_at"]


@override_settings(CATALOG_WINDOW_DAYS=10)
def test_the_window_follows_the_setting(user, make_memory):
    inside = make_memory(updated_at=NOW - timedelta(days=10))
    make_memory(updated_at=NOW - timedelta(days=11))
    payload = reflect(owner=user, now=NOW).payload
    assert [line_id(t) for t in catalog_lines(payload["catalog"]["episodic"])] == [shown(inside)]
    assert "10 days" in payload["catalog_note"]


@override_settings(REFLECT_MAX_TOKENS=600)
def test_the_budget_follows_the_setting_and_cuts_the_lowest_lines(user, make_memory):
    keep = make_memory(salience="high", gist="Important and kept")
    for i in range(30):
        make_memory(salience="low", gist=f"Minor detail number {i} " + "x" * 40, updated_at=NOW)
    result = reflect(owner=user, now=NOW)
    payload = result.payload
    assert payload["budget"]["max_tokens"] == 600
    assert payload["budget"]["tokens"] <= 600
    assert payload["budget"]["tokens"] == math.ceil(len(result.text) / 4)
    cut = payload["budget"]["cut"]["episodic"]
    assert cut > 0
    assert payload["catalog_omitted"]["episodic"] == cut
    assert payload["catalog_count"] == 31 - cut
    assert payload["catalog"]["episodic"][:2] == [
        "2026-11:",
        f"[{shown(keep)}] [high] Important and kept",
    ]
    assert "token budget" in payload["catalog_note"]


@override_settings(REFLECT_MAX_TOKENS=2000)
def test_core_over_budget_is_sent_as_lines_within_the_budget_with_a_warning(user, make_memory):
    big = [
        make_memory(
            core=True,
            category="identity",
            salience="high",
            gist=f"Core gist {i}",
            content="w" * 2000,
            updated_at=NOW - timedelta(hours=i),
        )
        for i in range(10)
    ]
    make_memory(gist="Would be a catalog line")
    result = reflect(owner=user, now=NOW)
    payload = result.payload
    assert result.tokens <= 2000
    assert payload["catalog_count"] == 0
    assert payload["core_count"] == 10
    in_full = [m["id"] for m in payload["core_memories"].get("identity", [])]
    # The newest first (same salience): those that fit in full, then the others as lines.
    assert in_full == [shown(m) for m in big[: len(in_full)]]
    assert [line_id(t) for t in payload["core_overflow"]] == [shown(m) for m in big[len(in_full) :]]
    assert payload["core_overflow"][0].endswith(f"[identity] [high] Core gist {len(in_full)}")
    assert "core memories do not fit in full" in result.warnings[0]


@override_settings(REFLECT_MAX_TOKENS=2000)
def test_a_core_heavy_store_keeps_the_payload_within_the_budget(user, make_memory):
    for i in range(120):
        make_memory(
            core=True,
            category=CATEGORIES[i % 5],
            gist=f"A fairly long gist for core memory number {i}, as synthetic stores have",
            content="content " * 300,
            updated_at=NOW - timedelta(hours=i),
        )
    Closing.objects.create(owner=user, reflection="r" * 5000, created_at=NOW)
    result = reflect(owner=user, now=NOW)
    payload = result.payload
    assert result.tokens <= 2000
    assert payload["core_memories"] == {}
    assert "recent_closings" not in payload
    assert len(payload["core_overflow"]) + payload["core_omitted"] == 120
    assert payload["core_omitted"] > 0


def test_reflect_changes_nothing(user, make_memory):
    memory = make_memory(gist="Recent", core=False)
    make_memory(core=True, category="identity")
    reflect(owner=user, now=NOW)
    memory.refresh_from_db()
    assert memory.retrieval_count == 0
    assert memory.last_retrieved is None
    assert memory.updated_at == NOW


def test_other_users_memories_are_invisible(user, other_user, make_memory):
    make_memory(owner=other_user, core=True, category="identity")
    make_memory(owner=other_user, salience="high")
    make_memory(owner=other_user, updated_at=NOW - timedelta(days=400))
    payload = reflect(owner=user, now=NOW).payload
    assert payload["core_count"] == 0
    assert payload["catalog_count"] == 0
    assert "catalog_omitted" not in payload


def _queries_of_reflect(user) -> int:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as queries:
        reflect(owner=user, now=NOW)
    return len(queries)


@override_settings(CATALOG_WINDOW_DAYS=45)
@pytest.mark.parametrize("size", [5, 200])
def test_reflect_query_count_does_not_grow_with_the_store(user, make_memory, size):
    for i in range(size):
        make_memory(
            core=i % 10 == 0,
            category=CATEGORIES[i % 5],
            salience=("high", "medium", "low")[i % 3],
            updated_at=NOW - timedelta(days=i),
        )
    for i in range(5):
        Closing.objects.create(owner=user, reflection=f"r{i}", created_at=NOW)
    # The kept counts and those touched lately, core memories, their text, closings,
    # catalog lines, short ids; core memories and catalog lines a salience at a time, in
    # pages while they could fit (two for the 200's 60 high-salience lines).
    queries = _queries_of_reflect(user)
    assert queries == (9 if size == 5 else 12)
    # Memories it can only count add no query.
    for i in range(100):
        make_memory(salience=("medium", "low")[i % 2], updated_at=NOW - timedelta(days=400))
    assert _queries_of_reflect(user) == queries
    assert reflect(owner=user, now=NOW).payload["core_count"] == len(range(0, size, 10))


def test_reflect_does_not_read_the_content_of_catalog_or_omitted_memories(user, make_memory):
    make_memory(content="SECRET-CONTENT " * 100, gist="Catalog line")
    make_memory(content="SECRET-CONTENT " * 100, updated_at=NOW - timedelta(days=400))
    make_memory(core=True, content="Core text")
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as queries:
        reflect(owner=user, now=NOW)
    content_reads = [q["sql"] for q in queries.captured_queries if '"content"' in q["sql"]]
    # The core query reads only the length of the text; the text is read by id.
    assert len(content_reads) == 2
    assert '"core"' in content_reads[0] and "LENGTH(" in content_reads[0].upper()
    assert '."content"' in content_reads[1] and '"id" IN' in content_reads[1]


@override_settings(REFLECT_MAX_TOKENS=2000)
def test_core_text_that_cannot_fit_in_full_is_not_read(user, make_memory):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    fits = make_memory(core=True, content="short", updated_at=NOW)
    huge = make_memory(core=True, content="HUGE " * 2000, updated_at=NOW - timedelta(days=1))
    later = make_memory(core=True, content="LATER", updated_at=NOW - timedelta(days=2))

    with CaptureQueriesContext(connection) as queries:
        result = reflect(owner=user, now=NOW)

    text_read = next(q for q in queries.captured_queries if '"id" IN' in q["sql"])
    # Only the first memory's text fits: the huge one and everything after it cannot.
    assert [e.id for e in result.core_full] == [str(fits.pk)]
    assert [e.id for e in result.core_lines] == [str(huge.pk), str(later.pk)]
    assert "HUGE" not in result.text and "LATER" not in result.text
    read_ids = text_read["sql"].replace("-", "")
    assert fits.pk.hex in read_ids
    assert huge.pk.hex not in read_ids and later.pk.hex not in read_ids


@override_settings(REFLECT_MAX_TOKENS=2000)
@override_settings(CATALOG_WINDOW_DAYS=45)
def test_lines_beyond_what_could_fit_are_counted_not_read_and_the_payload_is_unchanged(
    user, make_memories
):
    from memories.payload import build_reflect_payload
    from memories.payload_entries import CatalogEntry, max_lines

    saliences = ["high", "medium", "low"]
    made = make_memories(
        [
            {
                "category": CATEGORIES[i % 5],
                "salience": saliences[i % 3],
                "gist": f"Line {i}",
                "updated_at": NOW - timedelta(hours=i),
            }
            for i in range(2 * max_lines(2000 * 4))
        ]
        + [{"gist": "Old and quiet", "updated_at": NOW - timedelta(days=400)}]
    )

    result = reflect(owner=user, now=NOW)

    # The same payload as building it from every admitted line, none left unread.
    every_line = [
        CatalogEntry(str(m.pk), m.category, m.salience, m.gist, m.updated_at) for m in made[:-1]
    ]
    whole = build_reflect_payload(
        core=[],
        catalog=every_line,
        omitted={"episodic": 1},
        closings=[],
        window_days=45,
        max_tokens=2000,
        shown_ids={e.id: e.id[:8] for e in every_line},
    )
    assert result.text == whole.text
    assert result.cut_count == whole.cut_count == len(made) - 1 - result.payload["catalog_count"]
    assert len(result.cut) < result.cut_count


@override_settings(REFLECT_MAX_TOKENS=2000)
@override_settings(CATALOG_WINDOW_DAYS=45)
def test_catalog_lines_are_read_only_while_they_could_fit(user, make_memory):
    from memories.payload import build_reflect_payload, catalog_read_room
    from memories.payload_entries import CatalogEntry, catalog_order, could_fit, line_chars

    made = [
        make_memory(
            salience=("high", "medium", "low", "High")[i % 4],
            gist=f"A  line\tof {'word ' * (i % 30)}number {i}",
            updated_at=NOW - timedelta(hours=i // 3),
        )
        for i in range(400)
    ]
    result = reflect(owner=user, now=NOW)

    lines = sorted(
        (CatalogEntry(str(m.pk), m.category, m.salience, m.gist, m.updated_at) for m in made),
        key=catalog_order,
    )
    room = catalog_read_room(max_tokens=2000, core=[], n_full=0, closings=[])
    could = list(could_fit(lines, lambda e: line_chars(e.gist), room))
    # The lines read are the first of the catalog order that could fit, and only those.
    assert [e.id for e in (*result.included, *result.cut)] == [e.id for e in could]
    assert len(could) < 150
    whole = build_reflect_payload(
        core=[],
        catalog=lines,
        omitted={},
        closings=[],
        window_days=45,
        max_tokens=2000,
        shown_ids={e.id: e.id[:8] for e in lines},
    )
    assert result.text == whole.text


@override_settings(REFLECT_MAX_TOKENS=2000)
def test_core_memories_are_read_only_while_they_could_fit(user, make_memory):
    from memories.payload import build_reflect_payload
    from memories.payload_entries import CoreEntry, catalog_order, core_chars, could_fit

    made = [
        make_memory(
            core=True,
            category=CATEGORIES[i % 4],
            salience=("high", "medium", "low")[i % 3],
            gist=f"Core gist {i} " + "long " * 40,
            content=f"Core text {i} " + "much longer " * 100,
            updated_at=NOW - timedelta(hours=i),
        )
        for i in range(200)
    ]
    result = reflect(owner=user, now=NOW)

    entries = sorted(
        (
            CoreEntry(
                str(m.pk), m.category, m.salience, m.gist, m.updated_at, m.updated_at, m.content
            )
            for m in made
        ),
        key=catalog_order,
    )
    could = list(could_fit(entries, lambda e: core_chars(len(e.content), e.gist), 2000 * 4))
    read = [*result.core_full, *result.core_lines, *result.core_cut]
    assert [e.id for e in read] == [e.id for e in could]
    assert len(could) < 50
    assert result.core_omitted == 200 - len(result.core_full) - len(result.core_lines)
    whole = build_reflect_payload(
        core=entries,
        catalog=[],
        omitted={},
        closings=[],
        window_days=None,
        max_tokens=2000,
        shown_ids={e.id: e.id[:8] for e in entries},
    )
    assert result.text == whole.text


def test_a_memory_a_write_moves_between_two_pages_is_read_once(user, make_memory):
    from memories.models import Memory
    from memories.services.reflect import FIRST_PAGE, _in_order

    made = [
        make_memory(salience="high", updated_at=NOW - timedelta(hours=i))
        for i in range(FIRST_PAGE + 8)
    ]
    rows = _in_order(
        Memory.objects.filter(owner=user), {"high", "medium"}, ("id", "last_touched_at")
    )
    first = [next(rows) for _ in range(FIRST_PAGE)]
    # Between the first page and the second: one already read is demoted to medium, and
    # one is touched long ago, both moving after what was read.
    Memory.objects.filter(pk=made[0].pk).update(salience="medium")
    Memory.objects.filter(pk=made[1].pk).update(last_touched_at=NOW - timedelta(days=900))
    read = [row[0] for row in (*first, *rows)]
    assert len(read) == len(set(read)) == len(made)
    assert set(read) == {m.pk for m in made}


# --- short ids ----------------------------------------------------------------------


def test_ids_that_share_their_first_eight_characters_are_shown_longer(
    user, other_user, make_memory
):
    import uuid

    twin_a = make_memory(id=uuid.UUID("a002ab76-58b6-4e9c-ba6d-7ec35cb2e2be"), gist="A")
    twin_b = make_memory(id=uuid.UUID("a002ab76-5f00-4e9c-ba6d-7ec35cb2e2be"), gist="B")
    alone = make_memory(id=uuid.UUID("b002ab76-58b6-4e9c-ba6d-7ec35cb2e2be"), gist="C")
    # Another user's id sharing a prefix changes nothing for alice.
    make_memory(owner=other_user, id=uuid.UUID("b002ab76-0000-4e9c-ba6d-7ec35cb2e2be"))
    core = make_memory(
        core=True,
        id=uuid.UUID("c002ab76-58b6-4e9c-ba6d-7ec35cb2e2be"),
        linked_memories=[str(twin_a.pk)],
    )

    payload = reflect(owner=user, now=NOW).payload

    assert sorted(catalog_ids(reflect(owner=user, now=NOW))) == [
        "a002ab76-58",
        "a002ab76-5f",
        "b002ab76",
    ]
    assert payload["core_memories"]["episodic"][0]["id"] == "c002ab76"
    assert payload["core_memories"]["episodic"][0]["linked_memories"] == ["a002ab76-58"]
    assert {str(twin_b.pk), str(alone.pk), str(core.pk)}  # all of them are alice's


def test_with_no_window_every_live_memory_is_a_catalog_candidate(user, make_memory):
    # Off by default: a lower-salience memory untouched for a year is still listed when the
    # budget leaves room, and nothing is counted as omitted by a window.
    old = make_memory(updated_at=NOW - timedelta(days=365), salience="low", gist="Old")
    recent = make_memory(updated_at=NOW - timedelta(days=1), gist="Recent")
    result = reflect(owner=user, now=NOW)
    assert set(catalog_ids(result)) == {shown(old), shown(recent)}
    assert "catalog_omitted" not in result.payload
    assert result.payload["catalog_note"].startswith("Every memory is listed")


@override_settings(CATALOG_WINDOW_DAYS=0)
def test_a_window_of_zero_days_leaves_the_cap_off(user, make_memory):
    old = make_memory(updated_at=NOW - timedelta(days=400), salience="low", gist="Old")
    assert catalog_ids(reflect(owner=user, now=NOW)) == [shown(old)]
