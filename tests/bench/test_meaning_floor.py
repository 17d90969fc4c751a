from datetime import UTC, datetime

from bench import locomo
from bench.meaning_floor import Pair, meaning_only_pairs, precision_by_floor, render
from memories.recall import semantic
from memories.recall.embedding import embedder_named

WHEN = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)


def test_precision_counts_the_pairs_that_reach_each_floor():
    pairs = [
        Pair("q1", 520, True),
        Pair("q1", 480, False),
        Pair("q2", 490, False),
        Pair("q3", 300, True),
    ]
    rows = precision_by_floor(pairs, (300, 490, 500, 600))
    assert [(r.floor, r.pairs, r.evidence, r.questions) for r in rows] == [
        (300, 4, 2, 3),
        (490, 2, 1, 2),
        (500, 1, 1, 1),
        (600, 0, 0, 0),
    ]
    assert [r.precision for r in rows] == [0.5, 0.5, 1.0, None]
    table = render("turn", rows, 3)
    assert "| 0.49 | 2 | 1 | 0.500 | 2 |" in table
    assert "| 0.60 | 0 | 0 | – | 0 |" in table


def memory(key: str, text: str, sources: set[str]) -> locomo.UnitMemory:
    return locomo.UnitMemory(
        key=key,
        conversation="c",
        seq=int(key[-1]),
        created_at=WHEN,
        content=text,
        gist=locomo.first_words(text),
        sources=frozenset(sources),
    )


def test_pairs_are_the_memories_sharing_no_word_with_the_question_and_their_cosines():
    shares = memory("m0", "Maya plays the cello every morning.", {"D1:1"})
    apart = memory("m1", "Vegetarian: she eats no meat or fish.", {"D1:2"})
    other = memory("m2", "The harbour was foggy on Tuesday.", set())
    question = locomo.Question(
        key="c:q000",
        conversation="c",
        text="What are Maya's vegan food preferences?",
        category="single-hop",
        asked_at=WHEN,
        evidence=frozenset({"D1:2"}),
    )
    benchmark = locomo.Benchmark("observation", [shares, apart, other], [question])

    pairs = meaning_only_pairs(benchmark)

    embedder = embedder_named("wordllama")
    assert embedder is not None
    [query] = embedder.embed([question.text])
    assert query is not None
    expected = []
    for m, evidence in ((apart, True), (other, False)):
        [vector] = embedder.embed(
            [semantic.memory_text(gist=m.gist, content=m.content, tags=(), keywords=())]
        )
        assert vector is not None
        [cosine] = semantic.cosines(query, [semantic.stored(vector)])
        expected.append(Pair("c:q000", cosine, evidence))
    # "Maya" is shared, so the first memory is a word match, not meaning alone.
    assert pairs == expected
    assert pairs[0].cosine > pairs[1].cosine
