"""The cut of recall (memories.recall.scoring, `_cut_by_bound`, and the postings read in
impact order, memories.recall.impact): a query of words most memories hold reads and
scores only the matches whose hits leave them a chance, and ranks exactly as the
reference (tests/memories/reference.py) does from scratch, on whichever backend runs the
suite: random stores where a few words are in nearly every memory, small limits, equal
scores, recall histories and filters.
"""

import importlib
from datetime import timedelta

import pytest
from django.db import connection
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mcp_bridge.handlers import recall_filters
from memories.conf import activation_config, ranking_profile
from memories.models import Memory
from memories.recall import impact, postings
from memories.recall.owner_index import statistics
from memories.recall.postings import POSTINGS
from memories.recall.ranking import Relevance, parse_query, query_weights
from memories.recall.scoring import Band, Filters, best_candidates
from memories.services import rank_memories
from tests.conftest import NOW
from tests.memories.conftest import forget_sqlite_statistics
from tests.memories.reference import reference_rank
from tests.memories.test_relevance_reference import cosine_with, values
from tests.store import rolled_back

pytestmark = pytest.mark.django_db

recall_service = importlib.import_module("memories.services.recall")

# Words nearly every memory holds, and words few do.
COMMON = ["garden", "tea", "rain"]
RARE = ["cello", "lisbon", "東京"]
CATEGORIES = ["episodic", "identity"]

memory_specs = st.fixed_dictionaries(
    {
        # Each common word in most gists or contents, so most memories match any query.
        "gist": st.lists(st.sampled_from(COMMON + COMMON + RARE), max_size=3).map(" ".join),
        "content": st.lists(st.sampled_from(COMMON), min_size=1, max_size=3).map(" ".join),
        "salience": st.sampled_from(["high", "medium", "low"]),
        "category": st.sampled_from(CATEGORIES),
        # Few distinct moments, so that equal scores meet and their order decides.
        "updated_days_ago": st.sampled_from([0, 0, 2]),
        "retrieval_count": st.sampled_from([0, 0, 0, 1, 7, 10**9]),
        "retrieved_days_ago": st.sampled_from([0, 1 / 3, 30]),
    }
)
queries = st.lists(st.sampled_from(COMMON + RARE + ["the"]), min_size=1, max_size=6).map(" ".join)


@pytest.fixture(params=["grouped by the database", "held by the worker"])
def postings_of_words(request, monkeypatch):
    """A query's postings grouped in SQL (impact.all_hits), or held by the worker and
    grouped there (memories.recall.postings): every query of several words held, and the
    probe small enough that a small store's matches are handed over only in part."""
    if request.param == "held by the worker":
        monkeypatch.setattr(postings, "HOLD_FROM", 0)
        monkeypatch.setattr(impact, "PROBE", 2)
        # The cosine part's reach bounded by the matches' cosines (a blended query).
        monkeypatch.setattr(recall_service, "WIDE_QUERY", 0)
        monkeypatch.setattr(recall_service, "WIDE_SHARE", 0)
        monkeypatch.setattr(recall_service, "CHOSEN_SHARE", 1)
    POSTINGS.clear()
    yield
    POSTINGS.clear()


@pytest.fixture(params=["taproot, hybrid", "taproot, words only", "seed"])
def profile(request, settings):
    settings.TAPROOT_RANKING = request.param.split(",")[0]
    settings.TAPROOT_EMBEDDER = "none" if "words only" in request.param else "wordllama"


def history(spec, retrieved_days_ago: float) -> dict:
    """A drawn memory's category, salience and history, as make_memories takes them."""
    return {
        "salience": spec["salience"],
        "category": spec["category"],
        "updated_at": NOW - timedelta(days=spec["updated_days_ago"]),
        "created_at": NOW - timedelta(days=40),
        "retrieval_count": spec["retrieval_count"],
        "last_retrieved": (
            None if spec["retrieval_count"] == 0 else NOW - timedelta(days=retrieved_days_ago)
        ),
    }


def make_store(make_memories, specs) -> None:
    make_memories(
        [
            {
                "gist": spec["gist"],
                "content": spec["content"],
                **history(spec, spec["retrieved_days_ago"]),
            }
            for spec in specs
        ]
    )


# Each property draws stores through the database, so neither a deadline nor the
# function-scoped fixtures' health check applies.
stores_drawn = settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@stores_drawn
@given(
    store=st.lists(memory_specs, min_size=5, max_size=40),
    query=queries,
    category=st.none() | st.sampled_from(CATEGORIES),
    limit=st.sampled_from([1, 2, 3, 5]),
)
def test_recall_of_common_words_ranks_exactly_as_the_reference(
    user, make_memories, profile, postings_of_words, store, query, category, limit
):
    now = NOW + timedelta(days=1)
    with rolled_back():
        make_store(make_memories, store)
        live = [values(m) for m in Memory.objects.for_owner(user).live()]
        category_of = dict(Memory.objects.for_owner(user).values_list("pk", "category"))
        expected = reference_rank(
            live,
            query,
            profile=ranking_profile(),
            now=now,
            config=activation_config(),
            among=lambda m: category is None or category_of[m.id] == category,
            limit=limit,
            cosine=cosine_with(query),
        )
        filters, _ = recall_filters(query=query, category=category, limit=limit)
        got = rank_memories(user, filters, now=now).ranked

    assert [(r.candidate.id, r.score) for r in got] == [
        (r.candidate.id, r.score) for r in expected[:limit]
    ]


def _band(user, query: str, *, limit: int, now, blend: bool) -> Band:
    """The band the scoring statement returns for `query`, as recall asks for it."""
    profile, config = ranking_profile(), activation_config()
    parsed = parse_query(query, profile)
    index = statistics(user.pk, parsed.tokens)
    weights = query_weights(parsed, profile=profile, live=index.live, df=index.df, config=config)
    factors = profile.factors(config)
    return best_candidates(
        user.pk,
        weights=weights,
        factors=factors,
        denominator=Relevance(weights, *factors).denominator,
        filters=Filters(),
        limit=limit,
        now=now,
        config=config,
        blend=blend,
    )


def assert_ranked_as_the_reference(user, query: str, *, limit: int, now) -> list[str]:
    """Recall of `query` ranks as the reference does (ids, scores, order); the ids ranked."""
    profile, config = ranking_profile(), activation_config()
    live = [values(m) for m in Memory.objects.for_owner(user).live()]
    expected = reference_rank(
        live,
        query,
        profile=profile,
        now=now,
        config=config,
        limit=limit,
        cosine=cosine_with(query),
    )
    got = rank_memories(user, recall_filters(query=query, limit=limit)[0], now=now).ranked
    assert [(r.candidate.id, r.score) for r in got] == [(r.candidate.id, r.score) for r in expected]
    return [str(r.candidate.id) for r in got]


@pytest.mark.parametrize("embedder", ["wordllama", "none"])
@pytest.mark.parametrize("limit", [1, 3])
def test_matches_that_cannot_take_a_place_are_left_unscored(
    user, make_memories, settings, embedder, limit
):
    """A few memories hold every word of the query as keywords; many hold one of them in
    their content alone: those cannot come near the best, and are not scored."""
    settings.TAPROOT_EMBEDDER = embedder
    make_memories(
        [{"gist": "garden tea rain", "content": "plain", "salience": "high"}] * 6
        + [
            {
                "gist": "plain",
                "content": COMMON[i % 3],
                "salience": ["high", "medium", "low"][i % 3],
                "retrieval_count": i % 4,
                "last_retrieved": NOW - timedelta(days=i % 5) if i % 4 else None,
            }
            for i in range(60)
        ]
    )
    query = "garden tea rain"
    now = NOW + timedelta(days=1)
    band = _band(user, query, limit=limit, now=now, blend=embedder != "none")
    assert band.matched == 66
    assert band.scored < 66

    assert_ranked_as_the_reference(user, query, limit=limit, now=now)


@pytest.mark.parametrize("embedder", ["wordllama", "none"])
@pytest.mark.parametrize("limit", [1, 2, 5])
def test_one_common_word_reads_only_its_postings_that_can_place(
    user, make_memories, settings, embedder, limit
):
    """A word in every memory, a keyword of a few: only those few are read, scored and
    ranked (equal scores among them, so their order decides), as the reference ranks."""
    settings.TAPROOT_EMBEDDER = embedder
    make_memories(
        [
            {
                "gist": "plain",
                "search_keywords": ["garden"],
                "salience": "high",
                "updated_at": NOW - timedelta(days=i % 2),
                "retrieval_count": [0, 0, 0, 3][i % 4],
                "last_retrieved": NOW - timedelta(days=1) if i % 4 == 3 else None,
            }
            for i in range(8)
        ]
        + [
            {"gist": "plain", "content": "garden", "salience": ["high", "medium", "low"][i % 3]}
            for i in range(60)
        ]
    )
    now = NOW + timedelta(days=1)
    band = _band(user, "garden", limit=limit, now=now, blend=embedder != "none")
    if embedder == "none":  # blending, the cosine part could lift any of them
        assert band.scored <= 8
        assert band.matched > len(band.keys)

    assert_ranked_as_the_reference(user, "garden", limit=limit, now=now)


several_word_specs = st.fixed_dictionaries(
    {
        # A few memories hold the words as keywords; nearly all hold some in their content.
        "keywords": st.lists(st.sampled_from([*COMMON, "teapot"]), max_size=3),
        "content": st.lists(st.sampled_from([*COMMON, "teapot", "plain"]), min_size=1, max_size=4),
        "salience": st.sampled_from(["high", "medium", "low"]),
        "category": st.sampled_from(CATEGORIES),
        "tag": st.sampled_from(["boats", "bikes"]),
        "updated_days_ago": st.sampled_from([0, 0, 2]),
        "retrieval_count": st.sampled_from([0, 0, 0, 1, 7]),
    }
)


@stores_drawn
@given(
    store=st.lists(several_word_specs, min_size=3, max_size=40),
    query=st.lists(st.sampled_from([*COMMON, "tea", "cello"]), min_size=2, max_size=6).map(
        " ".join
    ),
    category=st.none() | st.sampled_from(CATEGORIES),
    tag=st.none() | st.just("boats"),
    limit=st.sampled_from([1, 2, 3]),
)
def test_several_common_words_rank_exactly_as_the_reference(
    user, make_memories, profile, postings_of_words, store, query, category, tag, limit
):
    """Queries of several words most memories hold, a few as keywords, with filters:
    every class of postings summed (impact.all_hits), the ranking is the reference's.
    "tea" is in no memory, though "teapot" is in many."""
    now = NOW + timedelta(days=1)
    with rolled_back():
        make_memories(
            [
                {
                    "gist": "plain",
                    "search_keywords": spec["keywords"],
                    "content": " ".join(spec["content"]),
                    "tags": [spec["tag"]],
                    **history(spec, 3),
                }
                for spec in store
            ]
        )
        live = [values(m) for m in Memory.objects.for_owner(user).live()]
        memories = Memory.objects.for_owner(user)
        category_of = dict(memories.values_list("pk", "category"))
        tags_of = dict(memories.values_list("pk", "tags"))
        expected = reference_rank(
            live,
            query,
            profile=ranking_profile(),
            now=now,
            config=activation_config(),
            among=lambda m: (
                (category is None or category_of[m.id] == category)
                and (tag is None or tag in tags_of[m.id])
            ),
            limit=limit,
            cosine=cosine_with(query),
        )
        filters, _ = recall_filters(
            query=query, category=category, tags=[tag] if tag else None, limit=limit
        )
        got = rank_memories(user, filters, now=now).ranked

    assert [(r.candidate.id, r.score) for r in got] == [
        (r.candidate.id, r.score) for r in expected[:limit]
    ]


@pytest.mark.parametrize("words", [2, 32, 33])
def test_queries_of_many_words_rank_as_the_reference(user, make_memories, words):
    """On SQLite up to 32 words are summed as one union of ranges of postings, more with a
    CASE over each posting (impact.all_hits, MOST_RANGES): both rank as the reference."""
    vocabulary = [f"word{i}" for i in range(words)]
    make_memories(
        [
            {
                "gist": " ".join(vocabulary[i % words : i % words + 3]),
                "content": " ".join(vocabulary[(i * 7) % words :: 5]),
                "salience": ["high", "medium", "low"][i % 3],
            }
            for i in range(40)
        ]
    )
    now = NOW + timedelta(days=1)
    assert_ranked_as_the_reference(user, " ".join(vocabulary), limit=5, now=now)


# SQLite's statistics of a store of 100,000 memories, one owner's (ANALYZE's numbers for the
# bench's store): every owner holds most entries, and every key many postings.
LARGE_STORE_STATISTICS = {
    ("memories_recallentry", "recallentry_owner_category"): "100000 100000 50000",
    ("memories_recallentry", "sqlite_autoindex_memories_recallentry_1"): "100000 1",
    ("memories_memorytoken", "memorytoken_impact"): "16000000 16000000 180 110 1",
    ("memories_memorytoken", "sqlite_autoindex_memories_memorytoken_1"): "16000000 130 1",
}


@pytest.fixture
def planned_as_a_large_store(db):
    """SQLite plans this test's statements as on a store of 100,000 memories; the
    statistics are dropped afterwards (they outlive the test's transaction)."""
    if connection.vendor != "sqlite":
        pytest.skip("SQLite only: its planner, with its statistics, chose the plan")
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
        cursor.execute("DELETE FROM sqlite_stat1")
        for (table, index), stat in LARGE_STORE_STATISTICS.items():
            cursor.execute("INSERT INTO sqlite_stat1 VALUES (%s, %s, %s)", [table, index, stat])
        cursor.execute("ANALYZE sqlite_master")
    yield
    forget_sqlite_statistics()


@pytest.mark.parametrize("query", ["garden", "garden tea", "garden tea rain"])
def test_the_probe_reads_entries_by_key_however_large_the_store(
    user, make_memories, planned_as_a_large_store, query
):
    """The floor's probe joins its few matches to their entries by key. Given its size as
    a bound parameter, SQLite took it for as many rows as the store and first read every
    entry of the owner (into a Bloom filter, or to search the matches from each): 9 ms of
    a 10 ms recall of 3 rare words at 100,000 memories."""
    make_memories([{"gist": "garden tea rain", "content": COMMON[i % 3]} for i in range(12)])
    statements: list[tuple[str, list]] = []

    def keep(execute, sql, params, many, context):
        if "AS score" in sql:
            statements.append((sql, list(params)))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(keep):
        rank_memories(user, recall_filters(query=query, limit=5)[0], now=NOW)

    assert statements
    for sql, params in statements:
        with connection.cursor() as cursor:
            cursor.execute("EXPLAIN QUERY PLAN " + sql, params)
            steps = [str(row[-1]) for row in cursor.fetchall()]
        reads_of_entries = [step for step in steps if " e " in f"{step} "]
        assert reads_of_entries
        assert all(
            step == "SEARCH e USING INTEGER PRIMARY KEY (rowid=?)" for step in reads_of_entries
        ), steps
