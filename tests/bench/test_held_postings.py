"""bench.held_postings times the same recall three ways (postings grouped by the database,
read and held by a first recall, served from those held) and checks they rank alike."""

import random
from datetime import timedelta

import pytest
from django.conf import settings

from bench import held_postings
from memories.conf import ranking_profile
from memories.recall import POSTINGS, impact, parse_query, postings
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


def test_each_way_ranks_alike_and_the_last_is_served_from_held_postings(
    user, make_memories, embedder, monkeypatch
):
    _store(make_memories)
    monkeypatch.setattr(postings, "HOLD_FROM", 0)  # a small store's words held all the same
    reads = []
    original = impact.read_held

    def read_held(*args, **named):
        reads.append(original(*args, **named))
        return reads[-1]

    monkeypatch.setattr(impact, "read_held", read_held)
    budget = settings.TAPROOT_POSTINGS_CACHE_MB
    queries = ["garden tea", "rain letters harbour", "tea garden rain letters harbour"]

    found = held_postings.measure(user, queries, rounds=2)

    assert found.identical == found.queries == 3
    assert {mode: len(times) for mode, times in found.timings.items()} == dict.fromkeys(
        held_postings.MODES, 6
    )
    # Grouped by the database: no read of held postings; the other two ways: one each.
    assert len(reads) == 2 * 3 * 2
    assert any(read is not None and not read.whole for read in reads)
    keys = parse_query(queries[-1], ranking_profile()).tokens
    assert all(POSTINGS.holds(user.pk, key) for key in keys)
    assert budget == settings.TAPROOT_POSTINGS_CACHE_MB
    POSTINGS.clear()


def test_after_a_write_held_words_are_followed_and_rank_as_read_whole(
    user, make_memories, monkeypatch
):
    _store(make_memories)
    monkeypatch.setattr(postings, "HOLD_FROM", 0)
    reads = []
    original = postings.statistics_and_postings

    def spy(owner_id, keys, **named):
        reads.append(list(keys))
        return original(owner_id, keys, **named)

    monkeypatch.setattr(postings, "statistics_and_postings", spy)
    queries = ["garden tea", "rain letters harbour"]

    found = held_postings.measure_after_writes(user, queries, COMMON, rounds=2)

    assert found.identical == found.queries == 2
    assert {mode: len(times) for mode, times in found.timings.items()} == dict.fromkeys(
        held_postings.AFTER, 4
    )
    # Per query: its words read whole once to hold them, then after each write read whole
    # only by the second way (the first brings the held words up to the write).
    assert [read for read in reads if read] == [["garden", "tea"]] * 3 + [
        ["harbour", "letter", "rain"]
    ] * 3
    POSTINGS.clear()
