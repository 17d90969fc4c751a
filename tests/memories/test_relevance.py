"""The taproot relevance profile (SPEC §3.1): its tokens, its weights, exact ties, and the
recall replies it shapes. The seed profile keeps its own tests (test_ranking, test_recall)."""

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from mcp_bridge.handlers import archive, recall, unarchive
from memories.models import Memory
from memories.recall.owner_index import statistics
from memories.recall.ranking import (
    TAPROOT,
    Query,
    idf_weight,
    parse_query,
    query_weights,
)
from memories.recall.tokens import snowball_stem, taproot_tokenize
from tests.conftest import NOW

LATER = NOW + timedelta(hours=1)
# The lexical rule alone: recall by meaning has tests of its own (test_meaning).
pytestmark = pytest.mark.usefixtures("lexical_only")


# --- tokens ----------------------------------------------------------------------------


def test_stop_words_are_dropped_and_the_rest_stemmed():
    assert taproot_tokenize("What did the cats do when it rained?") == ["cat", "rain"]


def test_an_apostrophe_separates_and_its_leftovers_are_stop_words():
    assert taproot_tokenize("James's bike") == ["jame", "bike"]
    assert taproot_tokenize("Don't forget Caroline's birthday") == [
        "don",
        "forget",
        "carolin",
        "birthday",
    ]


def test_unicode_letters_and_digits_make_words_and_only_ascii_is_stemmed():
    assert taproot_tokenize("東京 trip") == ["東京", "trip"]
    assert taproot_tokenize("Café crème, naïve résumés") == ["café", "crème", "naïve", "résumés"]
    assert taproot_tokenize("Flight 2026 to x42") == ["flight", "2026", "x42"]


def test_case_folding_and_compatibility_forms_meet():
    # ß folds to ss; the ligature ﬁ is "fi" once NFKC-normalised.
    assert taproot_tokenize("STRASSE") == taproot_tokenize("Straße")
    assert taproot_tokenize("ﬁshing") == taproot_tokenize("fishing") == ["fish"]


def test_underscores_and_punctuation_separate():
    assert taproot_tokenize("snake_case, kebab-case!") == ["snake", "case", "kebab", "case"]
    assert taproot_tokenize("?!... --- ;;") == []
    assert taproot_tokenize(None) == []


@pytest.mark.parametrize(
    ("word", "stem"),
    [
        ("running", "run"),
        ("studies", "studi"),
        ("generously", "generous"),
        ("classes", "class"),
        ("painting", "paint"),
        ("hiking", "hike"),
        ("adoption", "adopt"),
    ],
)
def test_ascii_words_take_the_snowball_english_stem(word, stem):
    assert snowball_stem(word) == stem
    assert taproot_tokenize(word) == [stem]


def test_a_query_of_stop_words_only_is_not_blank_but_matches_nothing():
    assert parse_query("what did they do?", TAPROOT) == Query((), only_stop_words=True)
    assert parse_query("?!", TAPROOT).blank
    assert parse_query("  ", TAPROOT).blank
    assert parse_query("Cats and dogs", TAPROOT).tokens == ("cat", "dog")


# --- weights, worked by hand ------------------------------------------------------------

# N = 4 live memories. "cello" is in two of them, "morning" (stem "morn") in two, "scales"
# (stem "scale") in one:
#   idf(df=2) = ln(1 + (4 − 2 + 0.5) / (2 + 0.5)) = ln 2        = 0.693147… → w = 693
#   idf(df=1) = ln(1 + (4 − 1 + 0.5) / (1 + 0.5)) = ln(10 / 3)  = 1.203972… → w = 1204
# Σw = 2590, so relevance = Σ w × f / 25,900 with f = 10 (keyword) or 7 (content only):
#   practice: cello in the gist, morning and scales only in the content
#             (6,930 + 4,851 + 8,428) / 25,900 = 20,209 / 25,900
#   repair:   cello in the gist                  6,930 / 25,900
#   run:      morning in the gist                6,930 / 25,900 (an exact tie with repair)
#   deadline: nothing in common                  not returned
STORE = {
    "practice": ("Cello practice", "Morning scales before work"),
    "repair": ("Cello repair", "Took the instrument to the shop"),
    "run": ("Morning run", "Ran five kilometres by the river"),
    "deadline": ("Work deadline", "The report is due on Friday"),
}
QUERY = "cello morning scales"


@pytest.fixture
def worked_store(make_memory):
    return {
        name: make_memory(gist=gist, content=content, updated_at=NOW - timedelta(days=i))
        for i, (name, (gist, content)) in enumerate(STORE.items())
    }


def test_idf_weights_are_rounded_integers():
    assert idf_weight(live=4, df=2) == 693
    assert idf_weight(live=4, df=1) == 1204
    assert idf_weight(live=4, df=0) == 2303  # ln 10: a word no memory holds weighs most
    assert idf_weight(live=5000, df=5000) == 0


def test_weights_of_a_query_follow_the_document_frequencies():
    query = parse_query(QUERY, TAPROOT)
    weights = query_weights(query, profile=TAPROOT, live=4, df={"cello": 2, "morn": 2, "scale": 1})
    assert weights == {"cello": 693, "morn": 693, "scale": 1204}


def test_words_every_memory_holds_weigh_alike_rather_than_dividing_by_zero():
    query = parse_query("cello scales", TAPROOT)
    df = {"cello": 5000, "scale": 5000}
    assert query_weights(query, profile=TAPROOT, live=5000, df=df) == {"cello": 1, "scale": 1}


@pytest.mark.django_db
def test_statistics_count_live_memories_and_document_frequencies(user, worked_store):
    stats = statistics(user.pk, ["cello", "morn", "scale", "absent"])
    assert (stats.live, stats.df) == (4, {"cello": 2, "morn": 2, "scale": 1})
    archive(owner=user, memory_id=worked_store["repair"].pk, now=LATER)
    stats = statistics(user.pk, ["cello", "morn"])
    assert (stats.live, stats.df) == (3, {"cello": 1, "morn": 2})
    unarchive(owner=user, memory_id=worked_store["repair"].pk, now=LATER)
    stats = statistics(user.pk, ["cello", "morn"])
    assert (stats.live, stats.df) == (4, {"cello": 2, "morn": 2})


@pytest.mark.django_db
def test_recall_scores_the_worked_example(user, worked_store):
    reply = recall(owner=user, query=QUERY, now=LATER)
    relevance = {"practice": 20_209 / 25_900, "repair": 6_930 / 25_900, "run": 6_930 / 25_900}
    expected = [
        (str(worked_store[name].pk), round(0.6 + 2.5 * share, 3))
        for name, share in relevance.items()
    ]  # never recalled (no history), medium salience 0.6
    # repair and run tie exactly; repair was updated more recently, so it comes first.
    assert [(r["id"], r["activation_score"]) for r in reply["results"]] == expected


@pytest.mark.django_db
def test_exact_ties_fall_to_newer_updated_at_then_smaller_id(user, make_memory):
    same_time = [make_memory(gist="Cello lesson", updated_at=NOW) for _ in range(3)]
    newest = make_memory(gist="Cello lesson", updated_at=NOW + timedelta(microseconds=1))
    reply = recall(owner=user, query="cello", now=LATER)
    tied = sorted(str(m.pk) for m in same_time)
    assert [r["id"] for r in reply["results"]] == [str(newest.pk), *tied]
    assert len({r["activation_score"] for r in reply["results"]}) == 1


@pytest.mark.django_db
def test_archived_memories_do_not_count_towards_the_weights(user, worked_store):
    before = recall(owner=user, query="cello", limit=1, now=LATER)["results"][0]
    archive(owner=user, memory_id=worked_store["repair"].pk, now=LATER)
    # cello is now in one memory of three: rarer, so it weighs more, but alone in the
    # query its share stays whole; the practice memory keeps its score.
    after = recall(owner=user, query="cello", limit=1, now=LATER + timedelta(days=1))
    assert after["results"][0]["id"] == before["id"] == str(worked_store["practice"].pk)
    stats = statistics(user.pk, ["cello"])
    assert (stats.live, stats.df) == (3, {"cello": 1})


@pytest.mark.django_db
def test_a_query_of_stop_words_returns_nothing_and_asks_for_a_distinctive_word(user, worked_store):
    reply = recall(owner=user, query="What did I do with the...", now=LATER)
    assert reply["count"] == 0
    assert reply["results"] == []
    assert "distinctive word" in reply["note"]
    assert not Memory.objects.filter(owner=user, retrieval_count__gt=0).exists()


@pytest.mark.django_db
def test_a_query_without_words_acts_as_blank(user, worked_store):
    assert recall(owner=user, query="?!", now=LATER)["count"] == 4


@pytest.mark.django_db
@pytest.mark.parametrize(
    "filters",
    [
        {"query": "cello morning"},
        {"query": "cello", "category": "episodic", "tags": ["music"]},
        {},
        {"category": "episodic"},
        {"ids": "REPLACED"},
    ],
)
def test_recall_runs_the_same_queries_whatever_the_store_size(
    user, other_user, make_memory, filters
):
    counts = []
    for owner, size in ((user, 5), (other_user, 60)):
        memories = [
            make_memory(owner=owner, gist=f"Cello morning {i}", tags=["music"]) for i in range(size)
        ]
        arguments = dict(filters)
        if "ids" in arguments:
            arguments["ids"] = [str(m.pk) for m in memories[:5]]
        with CaptureQueriesContext(connection) as captured:
            assert recall(owner=owner, limit=5, now=LATER, **arguments)["count"] == 5
        counts.append(len(captured))
    assert counts[0] == counts[1]
