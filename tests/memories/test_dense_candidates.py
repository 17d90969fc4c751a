"""An embedder's nearest memories compete with the lexical matches (issue 25): with MiniLM
the `dense_candidates` memories nearest the query that share no word with it are ranked
with the matches (relevance semantic_share × cosine), not only given the places the
matches leave; wordllama keeps none, so its rankings do not move."""

import pytest
from django.test import override_settings

from mcp_bridge.handlers import recall
from memories.conf import activation_config
from tests.conftest import NOW

pytestmark = pytest.mark.django_db


@pytest.fixture
def store(make_memory):
    """Written under the embedder the test asks for (ask for it first)."""
    return {
        # Holds "insurance" of the query "dog insurance": a weak lexical match.
        "insurance": make_memory(
            gist="Insurance", content="Home insurance renewal due in March; the broker is slow"
        ),
        # Shares no word with it, but means a dog (cosine 0.323 with MiniLM), and matters.
        "beagle": make_memory(
            gist="Beagle", content="Adopted a beagle puppy called Max", salience="high"
        ),
    }


def ids(reply):
    return [(r["gist"], r.get("matched_by", "words")) for r in reply["results"]]


# The floor is lowered for these tests: they are about competing, not about the floor.
LOW_FLOOR = {"meaning_floor": 300}


def test_the_nearest_memory_outranks_a_weaker_match(user, minilm, store):
    assert activation_config().dense_candidates == 20
    with override_settings(TAPROOT_ACTIVATION=LOW_FLOOR):
        reply = recall(owner=user, query="dog insurance", limit=1, now=NOW)
    assert ids(reply) == [("Beagle", "meaning")]


def test_without_dense_candidates_meaning_only_fills_places_the_matches_leave(user, minilm, store):
    no_dense = {**LOW_FLOOR, "dense_candidates": 0}
    with override_settings(TAPROOT_ACTIVATION=no_dense):
        assert ids(recall(owner=user, query="dog insurance", limit=1, now=NOW)) == [
            ("Insurance", "words")
        ]
        # A place left over goes to the nearest memory, ranked by its score.
        assert ids(recall(owner=user, query="dog insurance", limit=2, now=NOW)) == [
            ("Beagle", "meaning"),
            ("Insurance", "words"),
        ]


def test_wordllama_keeps_no_dense_candidates(user, store):
    assert activation_config().dense_candidates == 0
    with override_settings(TAPROOT_ACTIVATION={"meaning_floor": 0}):
        reply = recall(owner=user, query="dog insurance", limit=1, now=NOW)
    assert ids(reply) == [("Insurance", "words")]
