"""Each worker's held postings (memories.recall.postings, issue 32 item 1): a recall of
common words, one or several, served from them ranks exactly as the reference computes from
scratch, after every kind of write (create, update, promote, archive, unarchive, delete,
compress, import, undoing an import, a restore from a backup); a recall whose words are
held reads no posting; the budget lets the least recently used words go.

The stores here are small, so the fixture `held` holds every query's postings
(HOLD_FROM 0) and makes the probe small, so that the matches handed over are fewer than
all of them."""

import importlib
import uuid
from datetime import timedelta

import numpy as np
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from mcp_bridge import handlers
from memories.conf import embedder
from memories.models import IndexChange, Memory, MemoryVector, RecallEntry, RecallIndex
from memories.portability.backups import new_index_generation
from memories.recall import impact, indexing, owner_index, postings
from memories.recall.owner_index import statistics
from memories.recall.postings import POSTINGS, Postings, PostingsCache, grouped_hits
from memories.recall.semantic import cosines, embed_query, id_halves
from memories.services import import_store, restore_snapshot
from tests.conftest import NOW
from tests.memories.test_import import fixture_text
from tests.memories.test_recall_cut import assert_ranked_as_the_reference

pytestmark = pytest.mark.django_db

recall_service = importlib.import_module("memories.services.recall")

QUERY = "garden rain"


@pytest.fixture
def held(monkeypatch):
    """Every query served from held postings, its meaning part bounded
    by the matches' cosines; what each narrow read returned, in order."""
    monkeypatch.setattr(postings, "HOLD_FROM", 0)
    monkeypatch.setattr(impact, "PROBE", 2)
    monkeypatch.setattr(recall_service, "WIDE_QUERY", 0)
    monkeypatch.setattr(recall_service, "WIDE_SHARE", 0)
    monkeypatch.setattr(recall_service, "CHOSEN_SHARE", 1)
    reads = []
    original = impact.read_held

    def read_held(*args, **named):
        found = original(*args, **named)
        reads.append(found)
        return found

    monkeypatch.setattr(impact, "read_held", read_held)
    POSTINGS.clear()
    yield reads
    POSTINGS.clear()


def _remember(user, n: int, **fields) -> str:
    reply = handlers.remember(
        owner=user,
        category=fields.pop("category", "episodic"),
        gist=fields.pop("gist", f"Walk {n} in the garden"),
        content=fields.pop("content", f"Rain on the garden path, walk {n}."),
        salience=fields.pop("salience", ("high", "medium", "low")[n % 3]),
        now=NOW - timedelta(days=n % 5),
        **fields,
    )
    return str(reply["memory_id"])


def ranked(user, *, limit: int = 2) -> list[str]:
    """Recall of QUERY ranks as the reference does; the ids ranked."""
    return assert_ranked_as_the_reference(user, QUERY, limit=limit, now=NOW + timedelta(days=1))


@pytest.fixture
def walks(user):
    """Twenty-four memories holding words of QUERY (a third both as keywords, none of
    those of high salience; a third both in their text; a third "garden" alone), and a
    few holding neither."""
    ids = []
    for n in range(24):
        if n % 3 == 0:
            ids.append(_remember(user, n, search_keywords=["garden", "rain"], salience="medium"))
        elif n % 3 == 1:
            ids.append(_remember(user, n))
        else:
            ids.append(_remember(user, n, content=f"Sun on the path, walk {n}."))
    for n in range(3):
        _remember(user, 100 + n, gist=f"Shelf {n}", content="Books about boats.")
    return ids


def test_a_recall_of_several_words_is_served_from_held_postings(user, walks, held):
    ranked(user)

    assert POSTINGS.holds(user.pk, "garden") and POSTINGS.holds(user.pk, "rain")
    assert len(held) == 1 and held[0] is not None
    assert not held[0].whole  # fewer matches handed over than there are


def test_a_held_recall_bounds_each_match_by_its_own_salience(user, walks, monkeypatch, held):
    """The matches handed to the cut carry each one's salience part, as the index holds
    it, where the most any memory can have was assumed before."""
    given = []
    original = impact.read_held

    def read_held(entry, matches, cut, *rest):
        given.append((matches, cut))
        return original(entry, matches, cut, *rest)

    monkeypatch.setattr(impact, "read_held", read_held)
    ranked(user)
    ranked(user)
    assert len(given) == 2
    for matches, cut in given:
        assert matches.salience is not None
        scores, weight = cut.config.salience_scores, cut.config.salience_weight
        salience = dict(RecallEntry.objects.filter(owner=user).values_list("pk", "salience"))
        assert matches.salience.tolist() == [
            weight * scores[salience[entry]] for entry in matches.entries.tolist()
        ]
    assert len(set(matches.salience.tolist())) > 1


def test_a_held_recall_bounds_the_meaning_part_by_the_matches_cosines(
    user, walks, monkeypatch, held
):
    """The reach of the cosine part is bounded by the most cosine among the matches that
    could place with any cosine (their memories, as held), never above the best of all
    the owner's memories, and recall still ranks as the reference."""
    asked = []
    original = recall_service._ceiling

    def ceiling(owner_id, query_vector, keys, **named):
        found = original(owner_id, query_vector, keys, **named)
        everything = original(owner_id, query_vector, None, **named)
        asked.append((keys, found, everything))
        return found

    monkeypatch.setattr(recall_service, "_ceiling", ceiling)
    # The match nearest the query in meaning is the last written (the last entry).
    _remember(user, 60, gist="Garden rain", content="Garden rain.", salience="low")
    placed = [ranked(user, limit=limit) for limit in (1, 3)]
    assert len(asked) == 2
    live = set(Memory.objects.for_owner(user).live().values_list("pk", flat=True))
    query = embed_query(embedder(), QUERY)
    for (keys, found, everything), ids in zip(asked, placed, strict=True):
        chosen = {uuid.UUID(int=(high << 64) | low) for high, low in keys.tolist()}
        assert {uuid.UUID(i) for i in ids} <= chosen <= live
        stored = MemoryVector.objects.filter(memory_id__in=chosen)
        exact = cosines(query, [bytes(v) for v in stored.values_list("vector", flat=True)])
        assert max(exact) <= found <= everything
    assert all(read is not None and read.reach is not None for read in held)


def test_too_many_matches_to_scan_alone_are_bounded_by_every_vector(user, walks, monkeypatch, held):
    """Past `most_chosen` the matches that could place are not scanned one by one: every
    vector of the owner's bounds the cosine part, and recall still ranks as the reference."""
    monkeypatch.setattr(recall_service, "CHOSEN_SHARE", 10**6)
    asked = []
    original = recall_service._ceiling

    def ceiling(owner_id, query_vector, keys, **named):
        asked.append(keys)
        return original(owner_id, query_vector, keys, **named)

    monkeypatch.setattr(recall_service, "_ceiling", ceiling)
    ranked(user)
    assert asked == [None]
    assert held[-1] is not None and held[-1].reach is not None


def test_a_recall_whose_words_are_held_reads_no_posting(user, walks, held):
    first = ranked(user)
    token = connection.ops.quote_name("memories_memorytoken")
    with CaptureQueriesContext(connection) as queries:
        assert ranked(user) == first
    # The floor, the ranking and the reference's own reads, and the statement of N and the
    # version, which reads only the postings of entries written since (none): no word's
    # postings are read, grouped or counted.
    (reading,) = [q["sql"] for q in queries if f"FROM {token}" in q["sql"]]
    assert "t.owner_id" not in reading and "t.entry_id IN (SELECT c.entry" in reading


def assert_held_is_the_index(user) -> None:
    """The postings held of QUERY's words are the index's, as read now."""
    keys = sorted(set(QUERY.split()))
    read = owner_index.statistics_and_postings(user.pk, keys)
    index, encoded = read.index, read.postings
    for key in keys:
        held, stored = POSTINGS._words[(user.pk, key)], postings.parsed(encoded.get(key), index)
        assert (held.generation, held.version) == (index.generation, index.version)
        assert sorted(zip(held.entries.tolist(), held.in_keywords.tolist(), strict=True)) == sorted(
            zip(stored.entries.tolist(), stored.in_keywords.tolist(), strict=True)
        )


def assert_salience_is_the_index(user) -> None:
    """The salience and memory held of the owner's entries are each live entry's, as
    stored now."""
    held = POSTINGS._salience[user.pk]
    index = statistics(user.pk, [])
    assert (held.generation, held.version) == (index.generation, index.version)
    entries = RecallEntry.objects.filter(owner=user)
    stored = dict(entries.values_list("pk", "salience"))
    assert {
        entry: held.values[code]
        for entry, code in enumerate(held.codes.tolist(), start=held.low)
        if code != postings._UNKNOWN
    } == stored
    live = np.array(sorted(stored), dtype=np.int64)
    memories = dict(entries.values_list("pk", "memory_id"))
    assert (
        held.memory_keys(live).tolist() == id_halves([memories[e] for e in live.tolist()]).tolist()
    )


@pytest.fixture
def read_whole(monkeypatch):
    """The keys whose postings each statement read whole (not through the changes)."""
    reads: list[list[str]] = []
    original = postings.statistics_and_postings

    def spy(owner_id, keys, **named):
        reads.append(list(keys))
        return original(owner_id, keys, **named)

    monkeypatch.setattr(postings, "statistics_and_postings", spy)
    return reads


def test_held_postings_follow_every_kind_of_write(user, other_user, walks, held, read_whole):
    """After each write, recall ranks as the reference does, from postings held that are
    the index's as it now stands: brought up to it by the changes each write recorded,
    never read whole again."""
    new = None

    def remember_keywords():
        nonlocal new
        new = _remember(user, 50, search_keywords=["garden", "rain"], salience="high")
        assert ranked(user)[0] == new

    def import_then_undo():
        imported = import_store(owner=user, data=fixture_text(), now=NOW)
        ranked(user)
        assert_held_is_the_index(user)
        restore_snapshot(snapshot_id=imported.snapshot_id, now=NOW + timedelta(minutes=1))

    writes = [
        remember_keywords,
        # Its words edited away, then back.
        lambda: handlers.remember(
            owner=user, update_id=new, gist="Attic", content="Dust.", search_keywords=[], now=NOW
        ),
        lambda: handlers.remember(
            owner=user, update_id=new, gist="garden", content="garden rain", now=NOW
        ),
        lambda: handlers.promote(owner=user, memory_id=new, core=True, salience="low", now=NOW),
        # Salience raised alone: the held salience must follow, or the cut would be too low.
        lambda: handlers.promote(owner=user, memory_id=walks[9], salience="high", now=NOW),
        lambda: handlers.forget(owner=user, action="archive", memory_id=walks[0], now=NOW),
        lambda: handlers.forget(owner=user, action="unarchive", memory_id=walks[0], now=NOW),
        lambda: handlers.forget(owner=user, action="delete", memory_id=walks[3]),
        lambda: handlers.forget(
            owner=user,
            action="compress",
            ids=walks[6:8],
            content="Both walks: garden, rain.",
            gist="Garden walks in the rain",
            category="episodic",
            now=NOW,
        ),
        import_then_undo,
        # Another owner's write leaves this one's postings held as they are.
        lambda: _remember(other_user, 1, search_keywords=["garden", "rain"]),
    ]
    ranked(user)
    assert [read for read in read_whole if read] == [["garden", "rain"]]
    for write in writes:
        before = POSTINGS._words[(user.pk, "garden")]
        write()
        ranked(user)
        assert all(read == [] for read in read_whole[1:])
        assert_held_is_the_index(user)
        assert_salience_is_the_index(user)
        if write is not writes[-1]:
            assert POSTINGS._words[(user.pk, "garden")] is not before
    assert POSTINGS._words[(user.pk, "garden")] is before
    assert all(read is not None for read in held)


def test_writes_record_the_entries_they_changed(user, walks):
    """Each write records its version, with the entries it wrote, changed or took away,
    or a row without an entry when it changed none."""

    def recorded() -> dict[int, set[int | None]]:
        rows = IndexChange.objects.filter(owner=user).values_list("version", "entry")
        found: dict[int, set[int | None]] = {}
        for version, entry in rows:
            found.setdefault(version, set()).add(entry)
        return found

    def entry_of(memory_id: str) -> int:
        return RecallEntry.objects.get(memory_id=memory_id).pk

    version = RecallIndex.objects.get(owner=user).version
    assert set(recorded()) == set(range(1, version + 1))  # every version of the store's
    new = _remember(user, 60)
    assert recorded()[version + 1] == {entry_of(new)}
    handlers.remember(owner=user, update_id=new, gist="Attic", content="Dust.", now=NOW)
    assert recorded()[version + 2] == {entry_of(new)}
    handlers.promote(owner=user, memory_id=new, salience="low", now=NOW)
    assert recorded()[version + 3] == {entry_of(new)}
    gone = entry_of(walks[0])
    handlers.forget(owner=user, action="archive", memory_id=walks[0], now=NOW)
    assert recorded()[version + 4] == {gone}
    deleted = entry_of(walks[1])
    handlers.forget(owner=user, action="delete", memory_id=walks[1])
    assert recorded()[version + 5] == {deleted}
    # An archived memory reindexed: no entry to change.
    indexing.reindex([Memory.objects.get(pk=walks[0])], text_changed=False)
    assert recorded()[version + 6] == {None}


def test_held_postings_older_than_the_changes_kept_are_read_again(
    user, walks, held, read_whole, monkeypatch
):
    monkeypatch.setattr(indexing, "KEEP_CHANGES", 2)
    monkeypatch.setattr(indexing, "PRUNE_EVERY", 1)
    ranked(user)
    for n in range(3):
        _remember(user, 70 + n, search_keywords=["garden"])
    version = RecallIndex.objects.get(owner=user).version
    assert not IndexChange.objects.filter(owner=user, version__lte=version - 2).exists()

    ranked(user)
    assert [read for read in read_whole if read][-1] == ["garden", "rain"]
    assert_held_is_the_index(user)


def test_a_restored_database_is_read_again(user, walks, held, monkeypatch):
    """A restore gives every index a new generation (memories.portability.backups): the
    words held are of another store, however the version stands."""
    ranked(user)
    stale = {key: POSTINGS._words[(user.pk, key)] for key in ("garden", "rain")}
    new_index_generation()

    ranked(user)
    for key, before in stale.items():
        now_held = POSTINGS._words[(user.pk, key)]
        assert now_held is not before
        assert now_held.generation != before.generation


def test_words_of_a_query_below_the_threshold_are_not_held(user, walks, held, monkeypatch):
    monkeypatch.setattr(postings, "HOLD_FROM", 10_000)
    ranked(user)
    assert not POSTINGS.holds(user.pk, "garden")
    assert held == []


def test_with_no_budget_nothing_is_held(user, walks, held, settings):
    settings.TAPROOT_POSTINGS_CACHE_MB = 0
    ranked(user)
    assert not POSTINGS.holds(user.pk, "garden")
    assert held == []


def test_a_query_of_one_word_is_served_from_its_held_postings(user, walks, held, monkeypatch):
    """A word alone is held as the words of a longer query are, and the recall reads none
    of its postings from the database (impact.read_one_word reads them otherwise)."""
    read_by_the_database = []
    original = impact.read_one_word

    def read_one_word(*args, **named):
        read_by_the_database.append(args)
        return original(*args, **named)

    monkeypatch.setattr(impact, "read_one_word", read_one_word)
    for _ in range(2):
        assert_ranked_as_the_reference(user, "garden", limit=2, now=NOW + timedelta(days=1))

    assert POSTINGS.holds(user.pk, "garden") and not POSTINGS.holds(user.pk, "rain")
    assert len(held) == 2 and all(read is not None for read in held)
    assert read_by_the_database == []


def _postings(n: int, version: int = 1) -> Postings:
    return Postings(
        np.arange(n, dtype=np.int64), np.zeros(n, dtype=np.bool_), generation=None, version=version
    )


def test_past_its_budget_the_cache_lets_the_least_recently_used_words_go():
    size = _postings(100).nbytes
    cache = PostingsCache(budget=3 * size)  # room for three words
    cache._keep(1, {"a": _postings(100), "b": _postings(100)})
    cache._keep(2, {"a": _postings(100)})
    assert set(cache._held(1, ["a", "b"])) == {"a", "b"}  # used: now the most recent
    cache._keep(2, {"c": _postings(100)})

    assert not cache.holds(2, "a")
    assert all(cache.holds(*word) for word in [(1, "a"), (1, "b"), (2, "c")])
    assert cache.held_bytes() == 3 * size
    cache._keep(3, {"huge": _postings(10_000)})  # alone past the budget: not kept
    assert not cache.holds(3, "huge")
    assert cache.held_bytes() <= 3 * size


def test_of_two_reads_of_a_word_the_newer_is_kept():
    cache = PostingsCache(budget=1 << 20)
    newer = _postings(5, version=7)
    cache._keep(1, {"a": newer})
    cache._keep(1, {"a": _postings(6, version=6)})
    assert cache._words[(1, "a")] is newer
    assert cache.held_bytes() == newer.nbytes


def test_held_hits_are_the_sums_the_database_groups(user, walks):
    """grouped_hits adds up, per match, what impact.hits_sum does in SQL."""
    keys = ["garden", "rain", "walk"]
    read = postings.statistics_and_postings(user.pk, keys)
    index, encoded = read.index, read.postings
    read = {key: postings.parsed(encoded.get(key), index) for key in keys}
    weights = {"garden": 3, "rain": 5, "walk": 2}
    found = grouped_hits(read, weights, (4, 1))
    statement = impact.all_hits(user.pk, weights, (4, 1))
    with connection.cursor() as cursor:
        cursor.execute(f"WITH {statement.text} SELECT id, hits FROM hits", statement.params)
        expected = dict(cursor.fetchall())
    assert dict(zip(found.entries.tolist(), found.hits.tolist(), strict=True)) == expected
    assert {key: len(p.entries) for key, p in read.items()} == statistics(user.pk, keys).df


def test_held_hits_of_entries_far_apart_are_summed_alike():
    """An owner whose entries lie far apart in id (many owners' writes between) is summed
    by sorting rather than by counting over the span: the same sums."""
    far = Postings(
        np.array([5, 10**9, 3 * 10**9], dtype=np.int64),
        np.array([True, False, False]),
        None,
        1,
    )
    near = Postings(np.array([10**9], dtype=np.int64), np.array([True]), None, 1)
    found = grouped_hits({"a": far, "b": near}, {"a": 2, "b": 3}, (4, 1))
    assert found.entries.tolist() == [5, 10**9, 3 * 10**9]
    assert found.hits.tolist() == [8, 2 + 12, 2]


@pytest.mark.parametrize("factors", [(4, 1), (4, 0)])
def test_held_hits_count_every_match_even_one_worth_nothing(factors):
    """Entries close in id are summed over their span; a posting worth nothing (a content
    factor of 0) still makes its memory a match, as in the database's grouping."""
    a = Postings(np.array([7, 9, 12], dtype=np.int64), np.array([True, False, False]), None, 1)
    b = Postings(np.array([9, 10], dtype=np.int64), np.array([False, True]), None, 1)
    found = grouped_hits(
        {"a": a, "b": b, "c": Postings(a.entries[:0], a.in_keywords[:0], None, 1)},
        {"a": 2, "b": 3, "c": 5},
        factors,
    )
    keyword, content = factors
    assert found.entries.tolist() == [7, 9, 10, 12]
    assert found.hits.tolist() == [
        2 * keyword,
        2 * content + 3 * content,
        3 * keyword,
        2 * content,
    ]


def test_a_query_sharing_words_with_one_held_reads_only_its_other_words(
    user, walks, held, read_whole
):
    ranked(user)
    token = connection.ops.quote_name("memories_memorytoken")
    with CaptureQueriesContext(connection) as queries:
        index, found = POSTINGS.statistics(user.pk, ["garden", "sun"])
    assert len([q for q in queries if f"FROM {token}" in q["sql"]]) == 1
    assert [read for read in read_whole if read][-1] == ["sun"]
    assert found is not None and set(found.postings) == {"garden", "sun"}
    assert index.df == statistics(user.pk, ["garden", "sun"]).df
    assert POSTINGS.holds(user.pk, "sun")


def test_the_statements_lists_are_read_whole():
    """Entry ids of any size, one or none, come back as the integers listed."""
    big = [1, 2**40 + 3, 7, 2**62]
    assert postings._ids(",".join(map(str, big))).tolist() == big
    assert postings._ids("12").tolist() == [12]
    assert postings._ids("").tolist() == postings._ids(None).tolist() == []
