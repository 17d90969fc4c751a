"""What retrieval history adds to a recall's score (the taproot profile's bounded form):
it orders memories that match a query about equally and never outranks relevance. The
seed profile's unbounded original keeps its own tests (test_ranking, test_recall)."""

import math
from datetime import timedelta

import pytest

from mcp_bridge.handlers import archive, recall, unarchive
from memories.models import Memory
from memories.recall.ranking import (
    DEFAULT_ACTIVATION,
    SEED_ACTIVATION,
    ActivationConfig,
    activation,
    history,
)
from tests.conftest import NOW
from tests.memories.conftest import embedded_cosine

LATER = NOW + timedelta(hours=1)
WEIGHT = DEFAULT_ACTIVATION.history_weight


def lift(count: int, days: float) -> float:
    """history_weight × a / (1 + a), a = ln(count + 1) × (days + 1) ^ -0.5, by hand."""
    a = math.log(count + 1) / math.sqrt(days + 1)
    return 0.1 * a / (1 + a)


def history_of(count: int, days_ago: float | None, **config: object) -> float:
    return history(
        retrieval_count=count,
        last_retrieved=None if days_ago is None else LATER - timedelta(days=days_ago),
        created_at=NOW - timedelta(days=400),
        now=LATER,
        config=ActivationConfig(**config),
    )


def medium_score(count: int, relevance: float) -> float:
    """The whole score of a medium-salience memory last recalled this moment (if ever)."""
    return activation(
        retrieval_count=count,
        last_retrieved=LATER if count else None,
        created_at=NOW,
        salience="medium",
        now=LATER,
        relevance_value=relevance,
    )


# --- the formula -----------------------------------------------------------------------


def test_the_history_weight_is_a_twenty_fifth_of_the_query():
    assert WEIGHT == 0.1
    assert WEIGHT / DEFAULT_ACTIVATION.relevance_weight == pytest.approx(0.04)


def test_a_memory_never_recalled_has_no_history():
    assert history_of(0, None) == 0.0
    assert medium_score(0, 0.5) == 0.6 + 2.5 * 0.5


@pytest.mark.parametrize(
    ("count", "days", "expected"),
    [
        (1, 0, 0.040938),  # ln 2 / (1 + ln 2) of the weight
        (1, 1 / 3, 0.037511),  # eight hours on
        (5, 0, 0.064180),
        (5, 1 / 24, 0.063710),
        (100, 3650, 0.007096),  # ten years on: nearly none left
        (10**9, 0, 0.095397),  # a billion recalls this moment: still under the weight
    ],
)
def test_history_grows_with_recalls_fades_with_time_and_stays_under_its_weight(
    count, days, expected
):
    got = history_of(count, days)
    assert got == pytest.approx(lift(count, days), rel=1e-12)
    assert got == pytest.approx(expected, abs=1e-6)
    assert 0 < got < WEIGHT


def test_being_recalled_never_makes_a_memory_less_available():
    # The seed's novelty floor (0.6) puts a memory recalled once below a never-recalled
    # one from about eight hours later: half a day on, ln 2 × (1 + 1/2) ^ -0.5 < 0.6.
    never = SEED_ACTIVATION.base_weight * SEED_ACTIVATION.novelty_floor
    assert history_of(1, 1 / 2, history="seed") < never
    for days in (0, 1 / 3, 1, 30, 3650, 10**5):
        assert history_of(1, days) > history_of(0, None)


def test_a_memory_counted_without_a_moment_fades_from_its_creation():
    # Imports may carry a count without last_retrieved: the time since creation decays it.
    assert history_of(3, None) == pytest.approx(lift(3, 400 + 1 / 24), rel=1e-12)


def test_more_of_the_query_outranks_any_history():
    # A twenty-fifth more of the query's weight (0.1 of score) against a billion recalls
    # this very moment (0.095).
    hot, cold = medium_score(10**9, 0.50), medium_score(0, 0.54)
    assert hot == pytest.approx(0.6 + 2.5 * 0.50 + 0.095397, abs=1e-6)
    assert cold == pytest.approx(0.6 + 2.5 * 0.54)
    assert cold > hot


def test_the_seed_form_is_the_original_unbounded_rule():
    assert history_of(0, None, history="seed") == 0.6
    assert history_of(197, 0, history="seed") == pytest.approx(math.log(198))
    assert history_of(3, 8, history="seed", base_weight=0.5) == pytest.approx(0.5 * math.log(4) / 3)


def test_an_unknown_history_form_is_refused_at_configuration():
    with pytest.raises(ValueError, match="bounded, seed"):
        ActivationConfig(history="loud")


# --- recall ----------------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.usefixtures("lexical_only")
def test_among_equal_matches_the_one_recalled_lately_comes_first(user, make_memory):
    # The same text twice; the one never recalled is newer, which would win a tie.
    recalled = make_memory(gist="Cello lesson", retrieval_count=5, last_retrieved=NOW)
    fresh = make_memory(gist="Cello lesson", updated_at=NOW + timedelta(minutes=1))
    reply = recall(owner=user, query="cello", now=LATER)
    assert [r["id"] for r in reply["results"]] == [str(recalled.pk), str(fresh.pk)]
    scores = [r["activation_score"] for r in reply["results"]]
    assert scores == [round(lift(5, 1 / 24) + 0.6 + 2.5, 3), round(0.6 + 2.5, 3)]


@pytest.mark.django_db
@pytest.mark.usefixtures("lexical_only")
def test_recalls_through_the_tool_order_equal_matches(user, make_memory):
    first = make_memory(gist="Cello lesson")
    second = make_memory(gist="Cello lesson", updated_at=NOW + timedelta(minutes=1))
    for hour in range(5):
        recall(owner=user, ids=[str(first.pk)], now=NOW + timedelta(hours=hour))
    reply = recall(owner=user, query="cello", now=NOW + timedelta(hours=5))
    assert [r["id"] for r in reply["results"]] == [str(first.pk), str(second.pk)]
    assert reply["results"][0]["activation_score"] == round(lift(5, 1 / 24) + 0.6 + 2.5, 3)


@pytest.mark.django_db
@pytest.mark.usefixtures("lexical_only")
def test_a_fuller_match_never_recalled_outranks_a_much_recalled_partial_one(user, make_memory):
    # The probe of the benchmark's replay: one common word the hot memory holds, and two
    # rare ones only the cold memory holds.
    hot = make_memory(
        gist="Garden notes",
        content="Watering the garden.",
        retrieval_count=10**9,
        last_retrieved=LATER,
    )
    cold = make_memory(gist="Garden compost", content="Worms and eggshells for the garden.")
    for i in range(3):
        make_memory(gist=f"Garden bed {i}", content="More garden.")
    reply = recall(owner=user, query="garden compost eggshells", now=LATER)
    assert [r["id"] for r in reply["results"][:2]] == [str(cold.pk), str(hot.pk)]


# Ten words of equal weight: a memory holding one of them only in its content holds
# (9 × 10 + 7) / 100 = 0.97 of the query, 0.075 of score below one holding all ten.
TEN_WORDS = "alpha bravo charlie delta echo foxtrot golf hotel india juliet"


@pytest.mark.django_db
@pytest.mark.usefixtures("lexical_only")
@pytest.mark.parametrize(
    ("count", "days_ago", "winner"),
    [
        (10**9, 0, "nearly"),  # 0.095 of history beats 0.075 of relevance
        (10**9, 3650, "whole"),  # ten years on, 0.026 does not
        (1, 0, "whole"),  # one recall, 0.041, does not either
    ],
)
def test_the_database_cut_weighs_history_as_the_formula_does(
    user, make_memory, count, days_ago, winner
):
    # With limit 1 the database's own scores decide which memory is read at all.
    memories = {
        "whole": make_memory(gist=TEN_WORDS, content="Everything."),
        "nearly": make_memory(
            gist=TEN_WORDS.removesuffix(" juliet"),
            content="And juliet.",
            retrieval_count=count,
            last_retrieved=LATER - timedelta(days=days_ago),
        ),
    }
    [found] = recall(owner=user, query=TEN_WORDS, limit=1, now=LATER)["results"]
    assert found["id"] == str(memories[winner].pk)
    nearly = round(0.6 + 2.5 * 0.97 + lift(count, days_ago), 3)
    assert found["activation_score"] == (nearly if winner == "nearly" else 0.6 + 2.5)


@pytest.mark.django_db
@pytest.mark.usefixtures("lexical_only")
def test_salience_still_orders_equal_matches_above_history(user, make_memory):
    much_recalled = make_memory(
        gist="Cello lesson", salience="medium", retrieval_count=10**6, last_retrieved=LATER
    )
    high = make_memory(gist="Cello lesson", salience="high")
    low = make_memory(gist="Cello lesson", salience="low", retrieval_count=3, last_retrieved=LATER)
    reply = recall(owner=user, query="cello", now=LATER)
    assert [r["id"] for r in reply["results"]] == [str(high.pk), str(much_recalled.pk), str(low.pk)]


@pytest.mark.django_db
@pytest.mark.usefixtures("lexical_only")
def test_a_blank_query_orders_by_salience_then_history(user, make_memory):
    quiet = make_memory(gist="One", salience="high")
    busy = make_memory(gist="Two", salience="medium", retrieval_count=500, last_retrieved=NOW)
    stale = make_memory(
        gist="Three",
        salience="medium",
        retrieval_count=500,
        last_retrieved=NOW - timedelta(days=900),
    )
    reply = recall(owner=user, now=LATER)
    assert [r["id"] for r in reply["results"]] == [str(quiet.pk), str(busy.pk), str(stale.pk)]
    assert [r["activation_score"] for r in reply["results"]] == [
        1.0,
        round(0.6 + lift(500, 1 / 24), 3),
        round(0.6 + lift(500, 900 + 1 / 24), 3),
    ]


@pytest.mark.django_db
@pytest.mark.usefixtures("lexical_only")
def test_an_archived_memory_brings_no_history_into_recall_until_unarchived(user, make_memory):
    hot = make_memory(gist="Cello lesson", retrieval_count=10**6, last_retrieved=NOW)
    other = make_memory(gist="Cello lesson")
    archive(owner=user, memory_id=hot.pk, now=LATER)
    assert [r["id"] for r in recall(owner=user, query="cello", now=LATER)["results"]] == [
        str(other.pk)
    ]
    unarchive(owner=user, memory_id=hot.pk, now=LATER)
    reply = recall(owner=user, query="cello", now=LATER)
    assert [r["id"] for r in reply["results"]] == [str(hot.pk), str(other.pk)]
    # The count outlived the archive, and the recall after it came back added one.
    assert Memory.objects.get(pk=hot.pk).retrieval_count == 10**6 + 1


@pytest.mark.django_db
def test_a_memory_found_by_meaning_alone_scores_with_its_history_and_keeps_it(user, make_memory):
    vegetarian = make_memory(
        gist="Vegetarian",
        content="Maya does not eat meat or fish.",
        retrieval_count=4,
        last_retrieved=NOW,
    )
    make_memory(gist="Dentist", content="A filling on Tuesday at three.")
    cosine = embedded_cosine("vegan food preferences", vegetarian)
    assert cosine is not None
    [found] = recall(owner=user, query="vegan food preferences", now=LATER)["results"]
    assert found["matched_by"] == "meaning"
    # history + medium salience + 2.5 × (0.3 × the cosine); a guess strengthens nothing.
    assert found["activation_score"] == round(lift(4, 1 / 24) + 0.6 + 2.5 * 0.3 * cosine / 1000, 3)
    assert found["retrieval_count"] == 4
    assert Memory.objects.get(pk=vegetarian.pk).last_retrieved == NOW
