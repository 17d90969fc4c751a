"""bench.held_postings ranks with the query's postings held in the worker exactly as recall
ranks from the index, so the time it measures is for the same answer."""

import random
from datetime import timedelta

import numpy as np
import pytest

from bench import held_postings
from memories.conf import ranking_profile
from memories.models import Memory
from memories.recall import impact
from memories.recall.ranking import parse_query
from memories.services import RecallFilters, rank_memories
from tests.conftest import NOW

pytestmark = pytest.mark.django_db

COMMON = ["garden", "tea", "rain", "letters", "harbour"]


@pytest.fixture(params=["wordllama", "none"])
def embedder(request, settings):
    settings.TAPROOT_EMBEDDER = request.param


def _store(make_memories) -> None:
    rng = random.Random(7)
    make_memories(
        [
            {
                "gist": " ".join(rng.sample(COMMON, rng.randint(0, 2))),
                "content": " ".join(rng.sample(COMMON, rng.randint(1, 3))),
                "salience": rng.choice(["high", "medium", "low"]),
                "updated_at": NOW - timedelta(days=rng.choice([0, 2])),
                "created_at": NOW - timedelta(days=40),
                "retrieval_count": (count := rng.choice([0, 0, 1, 7])),
                "last_retrieved": None if count == 0 else NOW - timedelta(days=rng.choice([0, 30])),
            }
            for _ in range(240)
        ]
    )


@pytest.mark.parametrize("limit", [1, 3, 10])
def test_a_recall_with_the_postings_held_ranks_as_recall_does(
    user, make_memories, embedder, limit, monkeypatch
):
    _store(make_memories)
    reads = []
    reader = held_postings.held_reader
    original = impact.read_one_word

    def counted(held, saliences=None):
        read = reader(held, saliences)

        def counting(*args, **kwargs):
            found = read(*args, **kwargs)
            reads.append((len(kwargs["weights"]), found))
            return found

        return counting

    monkeypatch.setattr(held_postings, "held_reader", counted)
    saliences = held_postings.read_saliences(user.pk)
    for text in ["garden tea", "rain letters harbour", "tea garden rain letters harbour"]:
        keys = sorted(set(parse_query(text, ranking_profile()).tokens))
        held = held_postings.read_postings(user.pk, keys)
        filters = RecallFilters(query=text, limit=limit)
        as_is = rank_memories(user, filters, now=NOW).ranked
        assert len(as_is) == limit
        for also in [None, saliences]:
            with held_postings.postings_held(held, also):
                holding = rank_memories(user, filters, now=NOW).ranked
            assert [(r.candidate.id, r.score) for r in holding] == [
                (r.candidate.id, r.score) for r in as_is
            ]
    # Every query took the held postings' path, and some left matches unscored.
    assert [words for words, _ in reads] == [2, 2, 3, 3, 5, 5]
    assert all(isinstance(found, impact.OneWordRead) for _, found in reads)
    assert any(not found.whole for _, found in reads)
    assert impact.read_one_word is original


def test_the_held_postings_sum_each_matchs_hits_as_the_index_does(user, make_memories):
    _store(make_memories)
    weights = {"garden": 5, "rain": 3}
    held = held_postings.read_postings(user.pk, sorted(weights))
    entries, hits = held_postings.grouped_hits(held, weights, (10, 7))
    expected: dict[int, int] = {}
    for memory in Memory.objects.filter(owner=user).select_related("recall_entry"):
        entry = memory.recall_entry
        for token in entry.tokens.filter(key__in=weights):
            worth = weights[token.key] * (10 if token.in_keywords else 7)
            expected[entry.pk] = expected.get(entry.pk, 0) + worth
    assert dict(zip(entries.tolist(), hits.tolist(), strict=True)) == expected


def test_hits_are_summed_alike_whether_the_entries_run_together_or_lie_apart():
    def held(entries_of_a, entries_of_b):
        return {
            "a": held_postings.Postings(
                np.array(entries_of_a, dtype=np.int64), np.array([True, False, True])
            ),
            "b": held_postings.Postings(
                np.array(entries_of_b, dtype=np.int64), np.array([False, True])
            ),
        }

    weights = {"a": 3, "b": 2}
    for a, b in [([5, 6, 8], [6, 7]), ([5, 10**9, 8], [10**9, 7])]:  # ids close, ids apart
        entries, hits = held_postings.grouped_hits(held(a, b), weights, (10, 7))
        big = 10**9 if 10**9 in a else 6
        assert dict(zip(entries.tolist(), hits.tolist(), strict=True)) == {
            5: 30,
            big: 21 + 14,
            7: 20,
            8: 30,
        }
