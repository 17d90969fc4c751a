"""The usage replay (bench.replay) on a hand-made conversation whose every figure is worked
out below: questions asked through the real recall at the protocol's moments, what that
leaves behind, and the probes."""

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from bench import locomo, replay, retrieval
from memories.models import Memory

pytestmark = pytest.mark.django_db


def turn(dia_id: str, speaker: str, text: str) -> dict[str, str]:
    return {"speaker": speaker, "dia_id": dia_id, "text": text}


TURNS = {
    1: [
        turn("D1:1", "Mia", "I adopted a puppy named Biscuit."),
        turn("D1:2", "Leo", "I started learning the violin."),
        turn("D1:3", "Mia", "Biscuit loves the beach."),
    ],
    2: [
        turn("D2:1", "Mia", "Biscuit chewed my shoes."),
        turn("D2:2", "Leo", "My violin teacher moved to Lisbon."),
        turn("D2:3", "Leo", "Lisbon has lovely trams."),
        turn("D2:4", "Mia", "We bought a blue sofa."),
    ],
}
CONVERSATION = [
    {
        "sample_id": "conv-r",
        "conversation": {
            "speaker_a": "Mia",
            "speaker_b": "Leo",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": TURNS[1],
            "session_2_date_time": "10:00 am on 20 May, 2023",
            "session_2": TURNS[2],
        },
        "observation": {
            f"session_{s}_observation": {
                "Mia": [
                    [f"Mia said: {t['text']}", t["dia_id"]] for t in turns if t["speaker"] == "Mia"
                ],
                "Leo": [
                    [f"Leo said: {t['text']}", t["dia_id"]] for t in turns if t["speaker"] == "Leo"
                ],
            }
            for s, turns in TURNS.items()
        },
        "qa": [
            # Only D1:1 holds name and puppy (taproot tokens "name", "puppi"): asked twice.
            {"question": "What is the name of the puppy?", "evidence": ["D1:1"], "category": 4},
            {"question": "What is the name of the puppy?", "evidence": ["D1:1"], "category": 4},
            # D2:2 holds all four words; D1:2 holds leo and violin, D2:3 leo.
            {
                "question": "Where did Leo's violin teacher move?",
                "evidence": ["D2:2"],
                "category": 4,
            },
            # D1:3 holds biscuit and love; D1:1 and D2:1 biscuit; D2:3 love ("lovely").
            {"question": "What does Biscuit love?", "evidence": ["D1:3"], "category": 2},
            {"question": "Which chess tournament happened?", "evidence": ["D2:1"], "category": 1},
        ],
    }
]
# The conversation's last session + 1 day; then a question every 8 hours.
T0 = datetime(2023, 5, 21, 10, 0, tzinfo=UTC)


@pytest.fixture
def data(tmp_path: Path) -> Path:
    path = tmp_path / "replay-locomo.json"
    path.write_text(json.dumps(CONVERSATION))
    return path


def test_the_replay_scores_what_recall_returned_and_what_it_left(data, tmp_path):
    report: dict[str, Any] = retrieval.run(data_path=data, out_dir=tmp_path)

    systems = report["units"]["turn"]["systems"]
    # Static and replayed side by side, for every ranking.
    for name in retrieval.available_rankings():
        assert {name, f"{name}, replayed"} <= set(systems)
    replayed = systems["Taproot, replayed"]
    # Four questions find their evidence first; nothing holds a word of the chess one.
    assert replayed["scores"]["overall"] == {"n": 5, "R@5": 0.8, "R@10": 0.8, "MRR@10": 0.8}
    assert replayed["results"].endswith("taproot-replayed-turn.jsonl")
    lines = Path(replayed["results"]).read_text().splitlines()
    ranked = {row["query_id"]: row["ranked_ids"] for row in map(json.loads, lines)}
    assert ranked["conv-r:q000"] == ranked["conv-r:q001"] == ["conv-r:D1:1"]
    assert ranked["conv-r:q002"][0] == "conv-r:D2:2"
    assert set(ranked["conv-r:q002"]) == {"conv-r:D2:2", "conv-r:D1:2", "conv-r:D2:3"}
    assert ranked["conv-r:q003"][0] == "conv-r:D1:3"
    assert set(ranked["conv-r:q003"]) == {
        "conv-r:D1:3",
        "conv-r:D2:3",
        "conv-r:D1:1",
        "conv-r:D2:1",
    }
    assert ranked["conv-r:q004"] == []

    facts = report["replay"]["turn"]
    # Thirds of five questions in replay order: q0 q1 | q2 q3 | q4.
    assert facts["terciles"]["Taproot, replayed"] == [
        {"n": 2, "R@10": 1.0},
        {"n": 2, "R@10": 1.0},
        {"n": 1, "R@10": 0.0},
    ]
    # D1:1 was returned 3 times, D2:3 twice, four others once, the sofa never; of the 9
    # top-10 places D1:1 and D2:3 hold 5, more than half.
    assert facts["counts"]["Taproot, replayed"] == {
        "memories": 7,
        "max": 3,
        "p99": 3,
        "p90": 3,
        "never_recalled": 1,
        "top10_places": 9,
        "half_of_places_held_by": 2,
    }
    # The five most recalled are D1:1, D2:3, then D1:2, D1:3 and D2:1 (once each, in the
    # conversation's order). Only the sofa was never recalled; it shares "mia" (the
    # speaker's name, the commonest word) with D1:1, D1:3 and D2:1, and adds its two
    # rarest words, blue and bought. D2:3 and D1:2 share no word with it: no probe.
    probes = facts["probes"]["Taproot, replayed"]
    assert [(case["hot"], case["cold"], case["query"]) for case in probes["cases"]] == [
        ("conv-r:D1:1", "conv-r:D2:4", "mia blue bought"),
        ("conv-r:D1:3", "conv-r:D2:4", "mia blue bought"),
        ("conv-r:D2:1", "conv-r:D2:4", "mia blue bought"),
    ]
    assert probes["after_replay"] == {"n": 3, "cold_first": 1.0, "hot_above_cold": 0.0}
    assert probes["after_reset"] == {"n": 3, "cold_first": 1.0, "hot_above_cold": 0.0}
    assert all(case["after_reset"]["cold_rank"] == 1 for case in probes["cases"])
    # The counts were reset after the probes: every store ends as it began.
    assert not Memory.objects.filter(retrieval_count__gt=0).exists()
    # The observation unit is replayed as well.
    assert report["replay"]["observation"]["counts"]["Taproot, replayed"]["memories"] == 7


def test_each_question_is_asked_at_its_moment_and_strengthens_what_it_returns(data):
    benchmark = locomo.build(locomo.read_dataset(data), "turn")
    owners, keys = retrieval.load(benchmark)
    replayed = replay.replay(benchmark, owners, keys)

    hours = [T0 + timedelta(hours=8 * i) for i in range(6)]  # q0 … q4, then the end
    assert replayed.finished == {"conv-r": hours[5]}
    # The last question that returned each memory set its last_retrieved: q3 returned
    # D1:1, D1:3, D2:1 and D2:3; q2 D2:2 and D1:2.
    stored = {
        keys[m.pk].removeprefix("conv-r:"): (m.retrieval_count, m.last_retrieved)
        for m in Memory.objects.all()
    }
    assert stored == {
        "D1:1": (3, hours[3]),
        "D1:2": (1, hours[2]),
        "D1:3": (1, hours[3]),
        "D2:1": (1, hours[3]),
        "D2:2": (1, hours[2]),
        "D2:3": (2, hours[3]),
        "D2:4": (0, None),
    }


def test_percentiles_are_nearest_rank():
    assert replay.percentile([], 0.9) == 0
    assert replay.percentile([0, 1, 2, 3, 4, 5, 6, 7, 8, 9], 0.9) == 8
    assert replay.percentile([0, 1, 2, 3, 4, 5, 6, 7, 8, 9], 0.99) == 9
    assert replay.percentile([5], 0.5) == 5


def test_a_research_run_overrides_ranking_constants_by_name():
    from bench.overrides import activation_overrides

    assert activation_overrides(["history=seed", "base_weight=0.5"]) == {
        "history": "seed",
        "base_weight": 0.5,
    }
    with pytest.raises(SystemExit, match=r"NAME one of .*history_weight"):
        activation_overrides(["loudness=11"])
    with pytest.raises(SystemExit, match="give NAME=VALUE"):
        activation_overrides(["history_weight"])
    with pytest.raises(SystemExit, match="history_weight takes a float"):
        activation_overrides(["history_weight=much"])
    with pytest.raises(SystemExit, match="must be one of bounded, seed"):
        activation_overrides(["history=loud"])
    assert activation_overrides(["keyword_factor=12"]) == {"keyword_factor": 12}
