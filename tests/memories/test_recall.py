import importlib
import math
import re
import uuid
from datetime import timedelta

import pytest
from django.db import connection
from django.db.models import Model
from django.test import override_settings
from django.test.utils import CaptureQueriesContext

from mcp_bridge.handlers import recall
from memories.errors import InvalidInput
from memories.jsonutil import dumps
from memories.models import Memory, MemoryTag, Revision
from memories.services import record_reflect
from tests.conftest import NOW, SPEC_RECORD_KEYS
from tests.memories.conftest import forget_sqlite_statistics
from tests.store import unchanged

# Written for the seed relevance profile (SPEC §3); the taproot profile has its own.
pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("seed_profile")]

# The package re-exports the function under the module's name.
recall_module = importlib.import_module("memories.services.recall")
recall_tool = importlib.import_module("mcp_bridge.tools.recall")

LATER = NOW + timedelta(hours=2)


def ids_of(reply) -> list[str]:
    return [record["id"] for record in reply["results"]]


def test_reply_has_count_and_full_records_without_owner(user, make_memory):
    memory = make_memory(gist="Garden plans", tags=["home"])
    record_reflect(owner=user, now=LATER)  # else the reply also asks for a reflect
    reply = recall(owner=user, query="garden", now=LATER)
    assert list(reply) == ["status", "count", "results"]
    assert reply["status"] == "ok"
    assert reply["count"] == 1
    (record,) = reply["results"]
    assert list(record) == [*SPEC_RECORD_KEYS, "activation_score"]
    assert record["id"] == str(memory.pk)
    assert record["tags"] == ["home"]
    assert "owner" not in record


def test_score_is_reported_before_the_increment_and_records_after_it(user, make_memory):
    memory = make_memory(
        gist="Garden plans",
        salience="low",
        retrieval_count=3,
        last_retrieved=LATER - timedelta(days=8),
    )
    reply = recall(owner=user, query="garden", now=LATER)
    (record,) = reply["results"]
    # base ln(4) × (8 + 1)^-0.5, low salience 0.3, full keyword relevance 2.5
    assert record["activation_score"] == round(math.log(4) / 3 + 0.3 + 2.5, 3)
    assert record["retrieval_count"] == 4
    assert record["last_retrieved"] == "2026-11-29T14:00:00Z"
    memory.refresh_from_db()
    assert memory.retrieval_count == 4
    assert memory.last_retrieved == LATER
    assert memory.last_touched_at == LATER


def test_never_retrieved_memory_scores_novelty_floor_plus_salience(user, make_memory):
    make_memory(salience="high")
    (record,) = recall(owner=user, now=LATER)["results"]
    assert record["activation_score"] == 1.6


@override_settings(TAPROOT_ACTIVATION={"relevance_weight": 10.0, "novelty_floor": 0.0})
def test_ranking_weights_can_be_tuned_from_settings(user, make_memory):
    make_memory(gist="Garden", salience="low")
    (record,) = recall(owner=user, query="garden", now=LATER)["results"]
    assert record["activation_score"] == 10.3


def test_recall_does_not_move_updated_at_or_keep_a_revision(user, make_memory):
    memory = make_memory(gist="Garden plans")
    recall(owner=user, query="garden", now=LATER)
    memory.refresh_from_db()
    assert memory.updated_at == NOW
    assert Revision.objects.count() == 0


def test_keyword_tokens_weigh_more_than_content_only_tokens(user, make_memory):
    in_gist = make_memory(gist="Tomato harvest", content="Picked today.")
    in_tags = make_memory(gist="Harvest", tags=["Tomato"], content="x")
    in_keywords = make_memory(gist="Harvest", search_keywords=["tomatoes"], content="y")
    in_content = make_memory(gist="Harvest", content="So many tomatoes this year.")
    reply = recall(owner=user, query="tomato", limit=10, now=LATER)
    scores = {r["id"]: r["activation_score"] for r in reply["results"]}
    for keyword_memory in (in_gist, in_tags, in_keywords):
        assert scores[str(keyword_memory.pk)] == 1.2 + 2.5
    assert scores[str(in_content.pk)] == round(1.2 + 2.5 * 0.35, 3)


def test_relevance_counts_each_query_token_once_by_its_best_place(user, make_memory):
    # "garden" in the gist and the content counts once, as a keyword hit.
    make_memory(gist="Garden", content="The garden and the shed.")
    reply = recall(owner=user, query="garden shed fence", now=LATER)
    (record,) = reply["results"]
    assert record["activation_score"] == round(1.2 + 2.5 * (1 + 0.35) / 3, 3)


def test_query_without_relevance_returns_nothing_and_strengthens_nothing(user, make_memory):
    memory = make_memory(gist="Garden plans", content="Roses by the fence.")
    reply = recall(owner=user, query="bicycle", now=LATER)
    assert reply["count"] == 0
    assert reply["results"] == []
    memory.refresh_from_db()
    assert memory.retrieval_count == 0
    assert memory.last_retrieved is None


@pytest.mark.parametrize("query", ["?!... --- ;;", "", "   ", None])
def test_a_query_without_tokens_acts_as_blank(user, make_memory, query):
    make_memory(gist="One", salience="low")
    make_memory(gist="Two", salience="high")
    reply = recall(owner=user, query=query, now=LATER)
    assert [r["gist"] for r in reply["results"]] == ["Two", "One"]
    assert [r["activation_score"] for r in reply["results"]] == [1.6, 0.9]


def test_a_long_query_is_fine_and_an_enormous_one_refused(user, make_memory):
    make_memory(gist="Garden")
    words = " ".join(f"w{i}" for i in range(1200))
    assert recall(owner=user, query=f"garden {words}"[:10_000], now=LATER)["count"] == 1
    with unchanged(), pytest.raises(InvalidInput) as refused:
        recall(owner=user, query="garden " + "x" * 10_000, now=LATER)
    assert "10,000" in refused.value.message
    assert Memory.objects.get().retrieval_count == 1


def test_a_query_that_is_not_text_is_refused(user):
    with unchanged(), pytest.raises(InvalidInput):
        recall(owner=user, query=["garden"], now=LATER)


def test_only_returned_memories_are_strengthened(user, make_memory):
    returned = make_memory(gist="Garden")
    skipped = make_memory(gist="Fence")
    recall(owner=user, query="garden", now=LATER)
    assert Memory.objects.get(pk=returned.pk).retrieval_count == 1
    assert Memory.objects.get(pk=skipped.pk).retrieval_count == 0
    assert Memory.objects.get(pk=skipped.pk).last_retrieved is None


def test_limit_applies_after_ranking(user, make_memory):
    for i in range(7):
        make_memory(gist=f"Note {i}", salience="high" if i == 6 else "low")
    reply = recall(owner=user, limit=2, now=LATER)
    assert reply["count"] == 2
    assert reply["results"][0]["gist"] == "Note 6"
    assert recall(owner=user, now=LATER)["count"] == 5  # the default


@pytest.mark.parametrize("limit", [0, 51, -1, "many", 2.5, True, "²", "٣", "9" * 5000, " "])
def test_limit_outside_1_to_50_is_refused(user, make_memory, limit):
    make_memory()
    with unchanged(), pytest.raises(InvalidInput) as refused:
        recall(owner=user, limit=limit, now=LATER)
    assert "1" in refused.value.message and "50" in refused.value.message
    assert Memory.objects.get().retrieval_count == 0


@pytest.mark.parametrize("limit", [1, 50, "3", " 7 ", 4.0])
def test_limit_inside_the_range_is_accepted(user, make_memory, limit):
    make_memory()
    assert recall(owner=user, limit=limit, now=LATER)["count"] == 1


def test_archived_unknown_and_foreign_ids_are_simply_absent(user, other_user, make_memory):
    live = make_memory()
    archived = make_memory(archived_at=NOW, archive_reason="old")
    foreign = make_memory(owner=other_user)
    unknown = uuid.uuid4()
    reply = recall(
        owner=user, ids=[str(live.pk), str(archived.pk), str(foreign.pk), str(unknown)], now=LATER
    )
    assert ids_of(reply) == [str(live.pk)]
    assert Memory.objects.get(pk=archived.pk).retrieval_count == 0
    assert Memory.objects.get(pk=foreign.pk).retrieval_count == 0
    (warning,) = reply["warnings"]
    assert warning.startswith("No live memory of yours has these ids")
    assert f"{archived.pk}, {foreign.pk}, {unknown}" in warning
    assert str(live.pk) not in warning


def test_with_ids_the_default_limit_is_their_number(user, make_memory):
    memories = [make_memory() for _ in range(8)]
    reply = recall(owner=user, ids=[str(m.pk) for m in memories], now=LATER)
    assert reply["count"] == 8


def test_ids_accept_a_json_encoded_list_and_a_bare_id(user, make_memory):
    a, b = make_memory(), make_memory()
    assert set(ids_of(recall(owner=user, ids=dumps([str(a.pk), str(b.pk)]), now=LATER))) == {
        str(a.pk),
        str(b.pk),
    }
    assert ids_of(recall(owner=user, ids=str(a.pk), now=LATER)) == [str(a.pk)]


def test_at_most_50_ids_are_accepted(user):
    with unchanged(), pytest.raises(InvalidInput) as refused:
        recall(owner=user, ids=[str(uuid.uuid4()) for _ in range(51)], now=LATER)
    assert "50" in refused.value.message


def test_malformed_entries_of_ids_are_skipped_with_a_warning_naming_them(user, make_memory):
    good = make_memory()
    entries = [str(good.pk), "not-an-id", 5, None, "", True, "x" * 500, "not-an-id"]
    reply = recall(owner=user, ids=entries, now=LATER)
    assert ids_of(reply) == [str(good.pk)]
    (warning,) = reply["warnings"]
    assert warning.startswith("Skipped entries of ids that are not memory ids")
    assert "'not-an-id', 5, true, 'xxxxx" in warning
    assert "(500 characters)" in warning
    assert Memory.objects.get(pk=good.pk).retrieval_count == 1


def test_a_recall_by_ids_that_finds_none_says_which_were_not_found(user, make_memory):
    make_memory()  # not asked for: a recall by ids never falls back to the best memories
    unknown = uuid.uuid4()
    reply = recall(owner=user, ids=[str(unknown), "nope"], now=LATER)
    assert reply["count"] == 0
    assert reply["warnings"] == [
        "Skipped entries of ids that are not memory ids (send the id of one of your memories, "
        "as shown in the catalog (its first 8 or more characters) or whole): 'nope'.",
        f"No live memory of yours has these ids (unknown, archived or deleted): {unknown}.",
    ]
    only_malformed = recall(owner=user, ids=["nope"], now=LATER)
    assert only_malformed["count"] == 0
    assert len(only_malformed["warnings"]) == 1


def test_ids_that_exist_but_miss_the_query_or_the_limit_are_not_called_missing(user, make_memory):
    garden, fence = make_memory(gist="Garden"), make_memory(gist="Fence")
    by_query = recall(owner=user, ids=[str(garden.pk), str(fence.pk)], query="garden", now=LATER)
    assert ids_of(by_query) == [str(garden.pk)] and "warnings" not in by_query
    by_limit = recall(owner=user, ids=[str(garden.pk), str(fence.pk)], limit=1, now=LATER)
    assert by_limit["count"] == 1 and "warnings" not in by_limit


def test_a_recall_by_ids_that_finds_them_all_costs_no_extra_query(user, make_memory):
    ids = [str(make_memory().pk) for _ in range(3)]
    recall(owner=user, ids=ids, now=LATER)  # warm up anything cached per process
    with CaptureQueriesContext(connection) as found_all:
        recall(owner=user, ids=ids, now=LATER)
    with CaptureQueriesContext(connection) as one_missing:
        recall(owner=user, ids=[*ids, str(uuid.uuid4())], now=LATER)
    assert len(one_missing) == len(found_all) + 1


def test_a_list_of_ids_that_is_not_a_list_is_still_refused(user):
    with unchanged(), pytest.raises(InvalidInput) as refused:
        recall(owner=user, ids={"id": "x"}, now=LATER)
    assert refused.value.message.startswith("ids must be a list of memory ids")


def test_ids_with_a_query_return_only_the_given_ids_that_match(user, make_memory):
    match = make_memory(gist="Garden")
    no_match = make_memory(gist="Fence")
    make_memory(gist="Garden too")  # matches but was not asked for
    reply = recall(owner=user, ids=[str(match.pk), str(no_match.pk)], query="garden", now=LATER)
    assert ids_of(reply) == [str(match.pk)]


def test_an_empty_ids_list_does_not_filter(user, make_memory):
    make_memory()
    make_memory()
    for empty in ([], "", "[]"):
        assert recall(owner=user, ids=empty, now=LATER)["count"] == 2


def test_category_filter_narrows_and_accepts_legacy_names(user, make_memory):
    thread = make_memory(category="active_thread", gist="Garden project")
    make_memory(category="episodic", gist="Garden visit")
    reply = recall(owner=user, category="project", query="garden", now=LATER)
    assert ids_of(reply) == [str(thread.pk)]
    assert reply["warnings"]
    assert ids_of(recall(owner=user, category=" Active_Thread ", now=LATER)) == [str(thread.pk)]


def test_an_unknown_category_filter_is_refused(user):
    with unchanged(), pytest.raises(InvalidInput) as refused:
        recall(owner=user, category="diary", now=LATER)
    assert "identity" in refused.value.message


def test_tags_filter_needs_every_tag_case_insensitively(user, make_memory):
    both = make_memory(tags=["Garden", "Spring"])
    make_memory(tags=["garden"])
    make_memory(tags=["spring", "autumn"])
    reply = recall(owner=user, tags=["GARDEN", " spring "], now=LATER)
    assert ids_of(reply) == [str(both.pk)]
    assert len(ids_of(recall(owner=user, tags="garden", now=LATER))) == 2
    assert recall(owner=user, tags=["winter"], now=LATER)["count"] == 0


def test_since_keeps_memories_updated_on_or_after_it(user, make_memory):
    edge = make_memory(updated_at=NOW - timedelta(days=2))
    newer = make_memory(updated_at=NOW)
    make_memory(updated_at=NOW - timedelta(days=2, microseconds=1))
    reply = recall(owner=user, since="2026-11-27T12:00:00Z", now=LATER)
    assert set(ids_of(reply)) == {str(edge.pk), str(newer.pk)}
    offset = recall(owner=user, since="2026-11-27T13:00:00+01:00", now=LATER)
    assert set(ids_of(offset)) == {str(edge.pk), str(newer.pk)}


@pytest.mark.parametrize(
    "since",
    [
        "last tuesday",
        "2026-13-01T00:00:00Z",
        # Valid ISO text that no UTC date-time can hold once its zone is applied.
        "0001-01-01T00:00:00+01:00",
        "9999-12-31T23:59:59-01:00",
        42,
    ],
)
def test_a_malformed_since_is_refused(user, since):
    with unchanged(), pytest.raises(InvalidInput) as refused:
        recall(owner=user, since=since, now=LATER)
    assert "ISO" in refused.value.message


def test_since_at_the_edges_of_the_calendar_is_accepted(user, make_memory):
    make_memory()
    assert recall(owner=user, since="0001-01-01T00:00:00Z", now=LATER)["count"] == 1
    assert recall(owner=user, since="9999-12-31T23:59:59Z", now=LATER)["count"] == 0


def test_reply_stops_before_100000_characters_and_says_so(user, make_memory):
    big = [
        make_memory(content=f"{i} " + "w" * 19_990, gist=f"Big {i}", salience="high")
        for i in range(8)
    ]
    reply = recall(owner=user, limit=8, now=LATER)
    assert reply["truncated"] is True
    assert reply["note"]
    assert 1 <= reply["count"] < 8
    assert len(dumps(reply)) <= 100_000
    returned = set(ids_of(reply))
    for memory in big:
        memory.refresh_from_db()
        assert memory.retrieval_count == (1 if str(memory.pk) in returned else 0)


def test_the_truncation_note_names_the_reply_limit_in_force(user, make_memory, monkeypatch):
    monkeypatch.setattr(recall_tool, "MAX_REPLY_CHARS", 30_000)
    for i in range(3):
        make_memory(content=f"{i} " + "w" * 19_990, gist=f"Big {i}", salience="high")
    reply = recall(owner=user, limit=3, now=LATER)
    assert reply["count"] == 1
    assert reply["note"] == (
        "More memories matched, but the reply stopped before 30,000 characters. Ask again "
        "with a narrower query, a lower limit or explicit ids."
    )


def test_reply_that_fits_is_not_marked_truncated(user, make_memory):
    for i in range(4):
        make_memory(content=f"{i} " + "w" * 19_990)
    reply = recall(owner=user, limit=4, now=LATER)
    assert reply["count"] == 4
    assert "truncated" not in reply


def test_query_scores_only_memories_that_share_a_token(user, make_memory, monkeypatch):
    for i in range(60):
        make_memory(gist=f"Unrelated note {i}", content="Nothing to see.")
    make_memory(gist="Garden")
    make_memory(content="the garden shed")
    seen: list[int] = []
    real_rank = recall_module.rank

    def counting_rank(candidates, **kwargs):
        candidates = list(candidates)
        seen.append(len(candidates))
        return real_rank(candidates, **kwargs)

    monkeypatch.setattr(recall_module, "rank", counting_rank)
    assert recall(owner=user, query="garden", now=LATER)["count"] == 2
    assert seen == [2]


def delete(memory):
    Memory.objects.filter(pk=memory.pk).delete()


def archive(memory):
    Memory.objects.filter(pk=memory.pk).update(archived_at=LATER)


@pytest.mark.parametrize("step", ["rank_memories", "strengthen"])
@pytest.mark.parametrize("take_away", [delete, archive])
@pytest.mark.parametrize("by", ["query", "ids"])
def test_a_memory_taken_away_meanwhile_is_neither_returned_nor_strengthened(
    user, make_memory, monkeypatch, step, take_away, by
):
    """Another request deletes or archives a memory after ranking read it (by ids alone,
    ranking reads the memories whole), or just before the strengthening update."""
    gone = make_memory(gist="Garden gone", salience="high")
    kept = make_memory(gist="Garden kept")
    real_step = getattr(recall_module, step)

    def racing(*args, **kwargs):
        if step == "strengthen":
            take_away(gone)
        result = real_step(*args, **kwargs)
        if step == "rank_memories":
            take_away(gone)
        return result

    monkeypatch.setattr(recall_module, step, racing)
    asked = {"query": "garden"} if by == "query" else {"ids": [str(gone.pk), str(kept.pk)]}
    reply = recall(owner=user, now=LATER, **asked)
    assert ids_of(reply) == [str(kept.pk)]
    assert reply["count"] == 1
    assert reply["results"][0]["retrieval_count"] == 1
    assert Memory.objects.get(pk=kept.pk).retrieval_count == 1
    assert all(m.retrieval_count == 0 for m in Memory.objects.filter(pk=gone.pk))


@pytest.mark.parametrize("since", ["", "   "])
def test_a_blank_since_counts_as_not_given(user, make_memory, since):
    make_memory(updated_at=NOW - timedelta(days=400))
    assert recall(owner=user, since=since, now=LATER)["count"] == 1


SQLITE_INDEX_SEARCH = re.compile(r"SEARCH \S+ USING (?P<covering>COVERING )?INDEX (?P<index>\S+)")


def index_searches(sql: str) -> dict[str, bool]:
    """The indexes the database plans to search by a condition (not read whole) to answer
    `sql`, each with whether it answers alone, without reading its table's rows.

    PostgreSQL first measures the tables as they now are (ANALYZE), so that statistics
    other tests leave behind do not decide, then is told to avoid table and bitmap scans,
    which it rightly prefers on tables this small: it still scans a table that no index
    can serve, and reads the rows of one whose index lacks a column. The settings last
    until the test's transaction ends.
    """
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute(f"EXPLAIN QUERY PLAN {sql}")
            steps = (SQLITE_INDEX_SEARCH.match(row[-1]) for row in cursor.fetchall())
            return {step["index"]: bool(step["covering"]) for step in steps if step}
        cursor.execute("ANALYZE")
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("SET LOCAL enable_bitmapscan = off")
        cursor.execute(f"EXPLAIN (FORMAT JSON) {sql}")
        ((plan,),) = cursor.fetchall()
    searches = {}
    nodes = [plan[0]["Plan"]]
    while nodes:
        node = nodes.pop()
        if "Index Cond" in node:
            searches[node["Index Name"]] = node["Node Type"] == "Index Only Scan"
        nodes.extend(node.get("Plans", []))
    return searches


def indexes_of(model: type[Model]) -> set[str]:
    """The names the database gives a table's indexes (SQLite names those of unique
    constraints itself)."""
    catalog = {
        "sqlite": "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = %s",
        "postgresql": "SELECT indexname FROM pg_indexes WHERE tablename = %s",
    }
    with connection.cursor() as cursor:
        cursor.execute(catalog[connection.vendor], [model._meta.db_table])
        return {name for (name,) in cursor.fetchall()}


def test_query_and_tag_lookups_use_indexes(user, other_user, make_memory):
    make_memory(gist="Garden", tags=["home"])
    for _ in range(50):  # enough rows that reading a table whole costs more than a search
        make_memory(owner=other_user, gist="Garden", tags=["home"])
    forget_sqlite_statistics()  # a tiny analysed store would rightly plan otherwise
    with CaptureQueriesContext(connection) as captured:
        reply = recall(owner=user, query="garden", tags=["home"], now=LATER)
    assert ids_of(reply) == [str(Memory.objects.get(owner=user).pk)]
    scoring = next(q["sql"] for q in captured.captured_queries if q["sql"].startswith("WITH"))
    searches = index_searches(scoring)
    # The token lookup is answered by the covering (owner, key, ...) index alone and the tag
    # check probes an index of the tag rows: neither table is read whole.
    assert searches.get("memorytoken_impact") is True, searches
    assert searches.keys() & indexes_of(MemoryTag), searches


def test_recall_needs_few_queries_whatever_the_store_size(
    user, make_memory, django_assert_max_num_queries
):
    for i in range(40):
        make_memory(gist=f"Garden note {i}", tags=["garden"])
    # The ranking's reads, the strengthening, and whether a reflect is due.
    with django_assert_max_num_queries(8):
        assert (
            recall(owner=user, query="garden", tags=["garden"], limit=50, now=LATER)["count"] == 40
        )


# --- the same ranking on every backend ------------------------------------------------


def test_a_fixed_dataset_ranks_the_same_on_every_backend(user, other_user, make_memory):
    make_memory(id=uuid.UUID("11111111-0000-4000-8000-000000000001"), gist="Garden tomatoes")
    make_memory(gist="Garden", content="Tomato seedlings", salience="high")
    make_memory(gist="Notes", content="Garden and tomato plans")
    make_memory(
        gist="Harvest",
        tags=["Tomato"],
        salience="low",
        retrieval_count=3,
        last_retrieved=LATER - timedelta(days=8),
    )
    make_memory(id=uuid.UUID("a0000000-0000-4000-8000-000000000000"), gist="Tomato soup A")
    make_memory(id=uuid.UUID("0b000000-0000-4000-8000-000000000000"), gist="Tomato soup B")
    make_memory(gist="Tomato soup C", updated_at=NOW + timedelta(microseconds=1))
    make_memory(gist="Bicycle repair", content="Chain and gears")
    make_memory(gist="Garden tomato", archived_at=NOW, archive_reason="old")
    make_memory(owner=other_user, gist="Garden tomato")

    reply = recall(owner=user, query="Garden, TOMATOES!", limit=50, now=LATER)
    assert [(r["gist"], r["activation_score"]) for r in reply["results"]] == [
        ("Garden tomatoes", 3.7),
        ("Garden", 3.288),  # 1.6 + 2.5 × (1 + 0.35) / 2
        ("Tomato soup C", 2.45),  # ties: newer updated_at first,
        ("Tomato soup B", 2.45),  # then id ascending ("0b…" < "a0…")
        ("Tomato soup A", 2.45),
        ("Notes", 2.075),  # content only: 1.2 + 2.5 × 0.35
        ("Harvest", round(math.log(4) / 3 + 0.3 + 1.25, 3)),
    ]


def test_blank_query_ties_follow_updated_at_then_id(user, make_memory):
    ids = ["ffffffff-0000-4000-8000-000000000000", "00000000-0000-4000-8000-00000000000a"]
    for memory_id in ids:
        make_memory(id=uuid.UUID(memory_id))
    newest = make_memory(updated_at=NOW + timedelta(seconds=1))
    reply = recall(owner=user, limit=10, now=LATER)
    assert ids_of(reply) == [str(newest.pk), ids[1], ids[0]]
