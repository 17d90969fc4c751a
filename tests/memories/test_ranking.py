import math
import os
import subprocess
import sys
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from memories.recall.ranking import (
    SEED_ACTIVATION,
    ActivationConfig,
    Candidate,
    activation,
    base_activation,
    index_key,
    memory_terms,
    rank,
    relevance,
)
from memories.recall.tokens import stem, tokenize

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("word", "stemmed"),
    [
        ("running", "runn"),  # > 6 and ends ing
        ("singing", "sing"),
        ("sing", "sing"),  # too short for ing
        ("string", "string"),  # length 6: ing rule needs > 6
        ("walked", "walk"),  # > 5 and ends ed
        ("faded", "faded"),  # length 5: ed rule needs > 5
        ("boxes", "boxe"),  # length 5: es needs > 5, so the s rule applies
        ("matches", "match"),
        ("cats", "cats"),  # s rule needs length > 4
        ("dreams", "dream"),
        ("bus", "bus"),
        ("glass", "glass"),  # ss stays
        ("classes", "class"),  # es rule first
        ("grass", "grass"),
        ("things", "thing"),
        ("nothing", "noth"),
    ],
)
def test_stemmer_applies_the_first_matching_rule(word, stemmed):
    assert stem(word) == stemmed


def test_tokenizer_lowercases_splits_and_keeps_apostrophes():
    assert tokenize("James's CATS, running-fast! 42x") == ["james'", "cats", "runn", "fast", "42x"]


def test_tokenizer_treats_non_ascii_letters_as_separators():
    assert tokenize("café naïve") == ["caf", "na", "ve"]


def test_tokenizer_of_punctuation_only_is_empty():
    assert tokenize("?!... --- ;;") == []
    assert tokenize("") == []
    assert tokenize(None) == []


def test_memory_terms_split_keyword_tokens_from_content_only_tokens():
    terms = memory_terms(
        gist="Calculus progress",
        content="Definite integrals and calculus errors",
        tags=["Math"],
        search_keywords=["chain rule"],
    )
    assert terms.keywords == {"calculu", "progress", "math", "chain", "rule"}
    assert terms.content_only == {"definite", "integral", "and", "error"}


def test_never_retrieved_memory_scores_novelty_floor_plus_salience_in_the_seed_form():
    for salience, expected in (("high", 1.6), ("medium", 1.2), ("low", 0.9)):
        score = activation(
            retrieval_count=0,
            last_retrieved=None,
            created_at=NOW,
            salience=salience,
            now=NOW,
            relevance_value=None,
            config=SEED_ACTIVATION,
        )
        assert score == pytest.approx(expected)


def test_base_decays_with_days_since_last_retrieval():
    base = base_activation(
        retrieval_count=3,
        last_retrieved=NOW - timedelta(days=8),
        created_at=NOW - timedelta(days=100),
        now=NOW,
    )
    assert base == pytest.approx(math.log(4) / 3)


def test_base_uses_created_at_when_never_retrieved_but_counted():
    base = base_activation(
        retrieval_count=1, last_retrieved=None, created_at=NOW - timedelta(days=3), now=NOW
    )
    assert base == pytest.approx(math.log(2) / 2)


def test_future_timestamps_count_as_zero_days():
    base = base_activation(
        retrieval_count=1, last_retrieved=NOW + timedelta(days=5), created_at=NOW, now=NOW
    )
    assert base == pytest.approx(math.log(2))


def test_relevance_weights_keyword_hits_over_content_hits():
    assert relevance(query_size=4, keyword_hits=2, content_hits=2) == pytest.approx((2 + 0.7) / 4)
    assert relevance(query_size=0, keyword_hits=0, content_hits=0) == 0.0


def test_relevance_from_counts_ties_exactly_when_fractions_are_equal():
    # 7 content hits of 20 tokens equals 0.35 exactly as 0.35 × 20 / 20 would.
    assert relevance(query_size=20, keyword_hits=0, content_hits=20) == 0.35
    assert relevance(query_size=10, keyword_hits=0, content_hits=10) == relevance(
        query_size=20, keyword_hits=0, content_hits=20
    )


def test_weights_come_from_the_config_object():
    config = ActivationConfig(relevance_weight=10.0, novelty_floor=0.0)
    score = activation(
        retrieval_count=0,
        last_retrieved=None,
        created_at=NOW,
        salience="low",
        now=NOW,
        relevance_value=0.5,
        config=config,
    )
    assert score == pytest.approx(0.3 + 5.0)


def _candidate(**overrides):
    values = {
        "id": uuid.uuid4(),
        "salience": "medium",
        "retrieval_count": 0,
        "last_retrieved": None,
        "created_at": NOW,
        "updated_at": NOW,
        "hits": 0,
    }
    values.update(overrides)
    return Candidate(**values)


def test_a_query_drops_candidates_without_relevance():
    hit = _candidate(hits=100)
    miss = _candidate()
    ranked = rank([miss, hit], denominator=100, now=NOW)
    assert [r.candidate for r in ranked] == [hit]


def test_blank_query_ranks_everything_by_base_and_salience():
    low = _candidate(salience="low")
    high = _candidate(salience="high")
    ranked = rank([low, high], denominator=None, now=NOW)
    assert [r.candidate for r in ranked] == [high, low]


def test_equal_scores_go_to_newer_updated_at_then_smaller_id():
    older = _candidate(updated_at=NOW - timedelta(microseconds=1))
    a = _candidate(id=uuid.UUID("00000000-0000-4000-8000-00000000000a"))
    b = _candidate(id=uuid.UUID("00000000-0000-4000-8000-00000000000b"))
    ranked = rank([b, older, a], denominator=None, now=NOW)
    assert [r.candidate for r in ranked] == [a, b, older]


def test_ordering_is_identical_across_hash_seeds():
    script = (
        "import uuid, datetime as d\n"
        "from memories.recall.ranking import Candidate, rank\n"
        "now = d.datetime(2026, 1, 1, tzinfo=d.UTC)\n"
        "cs = [Candidate(uuid.UUID(int=i * 7919 % 1000), 'medium', 0, None, now, now,"
        " i % 3 * 100 + i % 2 * 35) for i in range(1, 60)]\n"
        "print([str(r.candidate.id)[-3:] for r in rank(cs, denominator=300, now=now)])\n"
    )
    outputs = set()
    for seed in ("0", "1", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        result = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True
        )
        outputs.add(result.stdout)
    assert len(outputs) == 1


def test_index_key_keeps_short_tokens_and_shortens_long_ones_distinctly():
    assert index_key("calculus") == "calculus"
    long_a, long_b = "a" * 200, "a" * 199 + "b"
    assert len(index_key(long_a)) == 64
    assert index_key(long_a) != index_key(long_b)
    assert index_key(long_a) == index_key("a" * 200)
