"""Which classes of postings recall reads (memories.recall.impact): a memory holding none
of them scores below the floor less the reach, whatever its history and salience;
checked against every way a memory can hold the query's words."""

import itertools

from hypothesis import given
from hypothesis import strategies as st

from memories.recall.impact import MARGIN, classes, to_read

FACTORS = (10, 7)
CEILING = 1.1  # the most history (0.1) and salience (1.0) of the default activation


@given(
    weights=st.dictionaries(
        st.sampled_from(["a", "b", "c", "d", "e"]), st.integers(0, 3000), min_size=1
    ),
    floor=st.floats(0, 4),
    reach=st.sampled_from([0.0, 1e-9, 0.3, 0.75]),
    relevance_weight=st.sampled_from([2.5, 1.75]),
)
def test_a_memory_holding_no_class_read_cannot_place(weights, floor, reach, relevance_weight):
    keyword, content = FACTORS
    denominator = keyword * sum(weights.values())
    if denominator == 0:
        return
    read = to_read(
        weights,
        FACTORS,
        relevance_weight=relevance_weight,
        denominator=denominator,
        ceiling=CEILING,
        floor=floor,
        reach=reach,
    )
    taken = {(p.key, p.in_keywords) for p in read}
    keys = list(weights)
    # Each word absent, a keyword, or in the content only.
    for places in itertools.product([None, True, False], repeat=len(keys)):
        held = {(key, place) for key, place in zip(keys, places, strict=True) if place is not None}
        if not held or held & taken:
            continue  # not a match, or one read
        hits = sum(
            weights[key] * (keyword if place else content)
            for key, place in zip(keys, places, strict=True)
            if place is not None
        )
        assert relevance_weight * (hits / denominator) + CEILING < floor - reach - MARGIN / 2


def test_keyword_postings_are_taken_before_any_content_ones():
    ordered = classes({"rare": 2500, "common": 700, "mid": 1600}, FACTORS)
    assert [(p.key, p.in_keywords) for p in ordered] == [
        ("rare", True),
        ("mid", True),
        ("common", True),
        ("rare", False),
        ("mid", False),
        ("common", False),
    ]


def test_a_floor_near_the_best_reads_only_the_rarest_words_keyword_postings():
    weights = {"rare": 2500, "common": 700, "mid": 1600}
    best = 2.5 + CEILING
    read = to_read(
        weights,
        FACTORS,
        relevance_weight=2.5,
        denominator=10 * sum(weights.values()),
        ceiling=CEILING,
        floor=best - 0.05,
        reach=1e-9,
    )
    assert [(p.key, p.in_keywords) for p in read] == [("rare", True)]


def test_a_low_floor_reads_every_class():
    weights = {"a": 1000, "b": 1000}
    read = to_read(
        weights,
        FACTORS,
        relevance_weight=2.5,
        denominator=20000,
        ceiling=CEILING,
        floor=0.5,
        reach=0,
    )
    assert len(read) == 4
