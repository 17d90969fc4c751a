"""Recall through the database gives exactly what the reference (tests/memories/reference.py)
computes from scratch (SPEC §3, §3.1, §3.2): ranking, scores and tie order, with archived
memories, filters, random recall histories and every kind of write in the mix, on
whichever backend runs the suite.

The reference reads nothing the index keeps: it tokenises every live memory of the
owner, counts N and the document frequencies itself, and applies the formula.
"""

import uuid
from datetime import timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mcp_bridge.handlers import (
    archive,
    compress,
    promote,
    recall,
    recall_filters,
    remember,
    unarchive,
)
from memories.conf import activation_config, embedder, ranking_profile
from memories.models import ChangeSource, Memory, Revision, Snapshot
from memories.recall.indexing import tag_key
from memories.recall.owner_index import statistics
from memories.recall.ranking import parse_query
from memories.services import (
    delete,
    edit_gist,
    import_store,
    migrate,
    rank_memories,
    restore_revision,
    restore_snapshot,
    set_curation,
)
from tests.conftest import NOW
from tests.memories.conftest import embedded_cosine
from tests.memories.reference import MemoryValues, reference_rank
from tests.store import rolled_back

pytestmark = pytest.mark.django_db

# Words whose stems meet (garden/gardens/gardening, run/running), stop words, an
# apostrophe, digits and words outside ASCII, so every tokenizer path and every place
# (keyword, content only, missing) occurs.
WORDS = [
    "garden",
    "gardens",
    "gardening",
    "running",
    "run",
    "the",
    "what",
    "James's",
    "42",
    "東京",
    "café",
    "tea",
    "cello",
    "lisbon",
]
CATEGORIES = ["episodic", "identity", "error"]
TAGS = ["home", "work", "Trip"]
texts = st.lists(st.sampled_from(WORDS), max_size=4).map(" ".join)
word_lists = st.lists(st.sampled_from(WORDS), max_size=2, unique=True)

memory_specs = st.fixed_dictionaries(
    {
        "gist": texts,
        "content": texts.map(lambda t: t or "plain"),
        "tags": st.lists(st.sampled_from(TAGS), max_size=2, unique=True),
        "search_keywords": word_lists,
        "salience": st.sampled_from(["high", "medium", "low"]),
        "category": st.sampled_from(CATEGORIES),
        "updated_days_ago": st.sampled_from([0, 0, 1, 30]),
        "archived": st.booleans(),
        # A recall history: none, a few, a huge count; this moment, hours or years ago,
        # or a count without a moment (as an import may leave).
        "retrieval_count": st.sampled_from([0, 0, 1, 5, 250, 10**9]),
        "retrieved_days_ago": st.sampled_from([None, 0, 1 / 3, 8, 3650]),
    }
)
# A write applied through the services, by the position of the memory it touches.
writes = st.one_of(
    st.tuples(st.just("recall"), texts),
    st.tuples(st.sampled_from(["archive", "unarchive", "delete"]), st.integers(0, 20)),
    st.tuples(st.just("promote"), st.integers(0, 20), st.sampled_from(["high", "low"])),
    st.tuples(st.just("update"), st.integers(0, 20), texts),
    st.tuples(st.just("import"), texts),
    st.tuples(st.just("compress"), st.integers(0, 20), st.integers(0, 20)),
    st.tuples(st.just("restore revision"), st.integers(0, 20)),
    st.tuples(st.just("restore snapshot")),
    st.tuples(st.just("migrate")),
    st.tuples(st.just("curate"), st.integers(0, 20), st.sampled_from(["high", "low"])),
    st.tuples(st.just("edit gist"), st.integers(0, 20), texts),
)
filter_specs = st.fixed_dictionaries(
    {
        "category": st.none() | st.sampled_from(CATEGORIES),
        "tags": st.lists(st.sampled_from(TAGS), max_size=1),
        "since_days_ago": st.none() | st.sampled_from([0, 2]),
        "some_ids": st.booleans(),
    }
)


# The writes of `writes` that act on the store as a whole; the others name a memory.
STORE_WRITES = ("recall", "import", "restore snapshot", "migrate")


def apply(write: tuple, user, ids: list[str], moment) -> None:
    if write[0] in STORE_WRITES:
        apply_to_the_store(write, user, moment)
        return
    memory_id = ids[write[1] % len(ids)]
    if Memory.objects.filter(pk=memory_id).exists():  # not deleted by an earlier write
        apply_to_a_memory(write, user, ids, memory_id, moment)


def apply_to_the_store(write: tuple, user, moment) -> None:
    kind = write[0]
    if kind == "recall":
        recall(owner=user, query=write[1], limit=3, now=moment)
        return
    if kind == "import":
        import_store(
            owner=user,
            data=[
                {
                    "id": str(uuid.uuid4()),
                    "category": "event",
                    "content": write[1] or "imported",
                    "gist": write[1],
                    "tags": ["home"],
                    "updated_at": "2026-11-01T00:00:00Z",
                }
            ],
            now=moment,
        )
        return
    if kind == "restore snapshot":
        if snapshot := Snapshot.objects.filter(owner=user).order_by("-pk").first():
            restore_snapshot(snapshot_id=snapshot.pk, owner=user, now=moment)
        return
    if kind == "migrate":
        migrate(owner=user, now=moment)


def apply_to_a_memory(write: tuple, user, ids: list[str], memory_id: str, moment) -> None:
    kind = write[0]
    if kind == "curate":
        set_curation(
            owner=user,
            memory_id=uuid.UUID(memory_id),
            salience=write[2],
            source=ChangeSource.DASHBOARD,
        )
        return
    if kind == "edit gist":
        edit_gist(
            owner=user,
            memory_id=uuid.UUID(memory_id),
            gist=write[2] or "edited",
            source=ChangeSource.DASHBOARD,
        )
        return
    if kind == "compress":
        other = ids[write[2] % len(ids)]
        both = Memory.objects.for_owner(user).live().filter(pk__in=[memory_id, other])
        if other != memory_id and both.count() == 2:
            compress(
                owner=user,
                ids=[memory_id, other],
                content="merged garden",
                gist="Merged",
                category="episodic",
                now=moment,
            )
        return
    if kind == "restore revision":
        if revision := Revision.objects.filter(memory_id=memory_id).order_by("-pk").first():
            restore_revision(
                owner=user, revision_id=revision.pk, source=ChangeSource.DASHBOARD, now=moment
            )
        return
    if kind == "archive":
        archive(owner=user, memory_id=memory_id, now=moment)
    elif kind == "unarchive":
        unarchive(owner=user, memory_id=memory_id, now=moment)
    elif kind == "delete":
        delete(owner=user, memory_id=uuid.UUID(memory_id))
    elif kind == "promote" and not Memory.objects.get(pk=memory_id).is_archived:
        promote(owner=user, memory_id=memory_id, salience=write[2], now=moment)
    elif kind == "update" and not (memory := Memory.objects.get(pk=memory_id)).is_archived:
        remember(
            owner=user,
            update_id=memory_id,
            category=memory.category,
            content=write[2] or "changed",
            now=moment,
        )


def values(memory: Memory) -> MemoryValues:
    return MemoryValues(
        id=memory.pk,
        gist=memory.gist,
        content=memory.content,
        tags=memory.tags,
        search_keywords=memory.search_keywords,
        salience=memory.salience,
        retrieval_count=memory.retrieval_count,
        last_retrieved=memory.last_retrieved,
        created_at=memory.created_at,
        updated_at=memory.updated_at,
    )


@pytest.fixture(params=["taproot, hybrid", "taproot, minilm", "taproot, words only", "seed"])
def profile(request, settings):
    settings.TAPROOT_RANKING = request.param.split(",")[0]
    settings.TAPROOT_EMBEDDER = "none" if "words only" in request.param else "wordllama"
    if "minilm" in request.param:
        request.getfixturevalue("minilm")


def cosine_with(query: str):
    """Each memory's cosine with the query, from vectors embedded in the test: None when
    recall does not blend in meaning."""
    if embedder() is None:
        return None
    return lambda memory: embedded_cosine(query, memory)


def make_store(user, make_memory, store: list[dict], history: list[tuple]) -> list[str]:
    """The drawn memories, then the drawn writes applied to them; their ids."""
    ids = [
        str(
            make_memory(
                gist=spec["gist"],
                content=spec["content"],
                tags=spec["tags"],
                search_keywords=spec["search_keywords"],
                salience=spec["salience"],
                category=spec["category"],
                updated_at=NOW - timedelta(days=spec["updated_days_ago"]),
                created_at=NOW - timedelta(days=40),
                archived_at=NOW if spec["archived"] else None,
                retrieval_count=spec["retrieval_count"],
                last_retrieved=(
                    None
                    if spec["retrieval_count"] == 0 or spec["retrieved_days_ago"] is None
                    else NOW + timedelta(days=3) - timedelta(days=spec["retrieved_days_ago"])
                ),
            ).pk
        )
        for spec in store
    ]
    for step, write in enumerate(history):
        apply(write, user, ids, NOW + timedelta(hours=step))
    return ids


drawn_stores = settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@drawn_stores
@given(
    store=st.lists(memory_specs, min_size=1, max_size=10),
    history=st.lists(writes, max_size=6),
    query=texts,
    filter_spec=filter_specs,
    # A small limit makes the database's cut decide which memories are scored at all.
    limit=st.sampled_from([1, 2, 3, 50]),
)
def test_database_ranking_equals_the_reference(
    user, other_user, make_memory, profile, store, history, query, filter_spec, limit
):
    now = NOW + timedelta(days=3)
    with rolled_back():
        make_memory(owner=other_user, gist=" ".join(WORDS), content="another user's")
        ids = make_store(user, make_memory, store, history)

        live = [values(m) for m in Memory.objects.for_owner(user).live()]
        chosen_ids = set(ids[::2]) if filter_spec["some_ids"] else None
        since = (
            None
            if filter_spec["since_days_ago"] is None
            else NOW - timedelta(days=filter_spec["since_days_ago"])
        )
        wanted_tags = {tag_key(t) for t in filter_spec["tags"]}
        category_of = dict(Memory.objects.for_owner(user).values_list("pk", "category"))

        def among(memory: MemoryValues) -> bool:
            return (
                filter_spec["category"] in (None, category_of[memory.id])
                and wanted_tags <= {tag_key(t) for t in memory.tags}
                and (since is None or memory.updated_at >= since)
                and (chosen_ids is None or str(memory.id) in chosen_ids)
            )

        expected = reference_rank(
            live,
            query,
            profile=ranking_profile(),
            now=now,
            config=activation_config(),
            among=among,
            limit=limit,
            cosine=cosine_with(query),
        )
        filters, _ = recall_filters(
            query=query,
            category=filter_spec["category"],
            tags=filter_spec["tags"],
            since=since.isoformat() if since else None,
            ids=sorted(chosen_ids) if chosen_ids else None,
            limit=limit,
        )
        got = rank_memories(user, filters, now=now).ranked
        keys = list(parse_query(query, ranking_profile()).tokens)
        stats = statistics(user.pk, keys) if keys else None

    assert [(r.candidate.id, r.score) for r in got] == [
        (r.candidate.id, r.score) for r in expected[:limit]
    ]
    if stats is not None:
        profile = ranking_profile()
        held = [
            set(
                parse_query(
                    " ".join([m.gist, m.content, *m.tags, *m.search_keywords]), profile
                ).tokens
            )
            for m in live
        ]
        df = {key: n for key in keys if (n := sum(key in tokens for tokens in held))}
        assert (stats.live, stats.df) == (len(live), df)


@pytest.mark.parametrize("ranking", ["taproot", "seed"])
@drawn_stores
@given(
    store=st.lists(memory_specs, min_size=1, max_size=10),
    history=st.lists(writes, max_size=6),
    # Positions in the store; past its end, another user's memory or an id naming none.
    asked=st.lists(st.integers(0, 11), min_size=1, max_size=8, unique=True),
    query=st.sampled_from([None, "", "  "]),
    category=st.none() | st.sampled_from(CATEGORIES),
    since_days_ago=st.none() | st.sampled_from([0, 2]),
    limit=st.sampled_from([None, 1, 2, 50]),
)
def test_recall_by_ids_alone_equals_the_reference(
    user,
    other_user,
    make_memory,
    settings,
    ranking,
    store,
    history,
    asked,
    query,
    category,
    since_days_ago,
    limit,
):
    """A recall by ids with no query nor tags reads the memories whole and ranks them
    itself (memories.services.recall, `_by_ids`), not through the scoring statement: the
    same memories, scores and order as the reference all the same."""
    settings.TAPROOT_RANKING = ranking
    now = NOW + timedelta(days=3)
    with rolled_back():
        theirs = str(make_memory(owner=other_user, gist="garden", content="another user's").pk)
        ids = make_store(user, make_memory, store, history)
        known = [*ids, theirs, str(uuid.uuid4())]
        chosen = {known[i] for i in asked if i < len(known)} or {ids[0]}
        since = None if since_days_ago is None else NOW - timedelta(days=since_days_ago)
        live = [values(m) for m in Memory.objects.for_owner(user).live()]
        category_of = dict(Memory.objects.for_owner(user).values_list("pk", "category"))
        expected = reference_rank(
            live,
            "",
            profile=ranking_profile(),
            now=now,
            config=activation_config(),
            among=lambda m: (
                str(m.id) in chosen
                and category in (None, category_of[m.id])
                and (since is None or m.updated_at >= since)
            ),
            limit=limit or len(chosen),
        )
        filters, _ = recall_filters(
            query=query,
            ids=sorted(chosen),
            category=category,
            since=since.isoformat() if since else None,
            limit=limit,
        )
        got = rank_memories(user, filters, now=now)

    assert got.memories is not None  # read whole, not through the scoring statement
    assert [(r.candidate.id, r.score) for r in got.ranked] == [
        (r.candidate.id, r.score) for r in expected
    ]


@pytest.mark.parametrize("limit", [1, 3, 10])
def test_a_query_many_memories_match_blends_exactly_as_the_reference(user, make_memory, limit):
    """Past WIDE_QUERY the reach of the cosine part is narrowed by the best cosine any
    memory has with the query; the ranking must stay the reference's."""
    from memories.services.recall import WIDE_QUERY

    vocabulary = ["garden", "tea", "cello", "lisbon", "running", "cat", "rain", "book", "東京"]
    for i in range(90):
        pick = [vocabulary[(i * k + i // 9) % len(vocabulary)] for k in (1, 2, 5)]
        make_memory(
            gist=" ".join(pick),
            content=" ".join(vocabulary[(i + k) % len(vocabulary)] for k in range(i % 4 + 1)),
            salience=["high", "medium", "low"][i % 3],
            retrieval_count=i % 5,
            last_retrieved=NOW - timedelta(days=i % 7) if i % 5 else None,
        )
    query = "garden tea cello book rain"
    keys = list(parse_query(query, ranking_profile()).tokens)
    assert sum(statistics(user.pk, keys).df.values()) >= WIDE_QUERY
    now = NOW + timedelta(days=1)
    live = [values(m) for m in Memory.objects.for_owner(user).live()]
    expected = reference_rank(
        live,
        query,
        profile=ranking_profile(),
        now=now,
        config=activation_config(),
        limit=limit,
        cosine=cosine_with(query),
    )
    got = rank_memories(user, recall_filters(query=query, limit=limit)[0], now=now).ranked
    assert [(r.candidate.id, r.score) for r in got] == [(r.candidate.id, r.score) for r in expected]
