"""The context replay (bench.context) on a hand-made conversation whose every hit is
worked out below: three sessions, the first of three turns so long that no line of them
fits in the small budget, the others short; questions whose evidence lies in one session
or several, covered by one memory, two or none."""

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from bench import context, locomo

pytestmark = pytest.mark.django_db

# Words of 17 letters: a gist (the first 15 words) of about 270 characters, some 70 tokens
# a line, near the longest a gist may be.
LONG = " ".join(letter * 17 for letter in "abcdefghijklmno")


def turn(dia_id: str, speaker: str, text: str) -> dict[str, str]:
    return {"speaker": speaker, "dia_id": dia_id, "text": text}


CONVERSATION = [
    {
        "sample_id": "conv-c",
        "conversation": {
            "speaker_a": "Mia",
            "speaker_b": "Leo",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                turn("D1:1", "Mia", f"Puppy {LONG}"),
                turn("D1:2", "Leo", f"Violin {LONG}"),
                turn("D1:3", "Mia", f"Beach {LONG}"),
            ],
            "session_2_date_time": "10:00 am on 20 May, 2023",
            "session_2": [
                turn("D2:1", "Mia", "Biscuit chewed my shoes."),
                turn("D2:2", "Leo", "My violin teacher moved to Lisbon."),
            ],
            "session_3_date_time": "9:00 am on 2 June, 2023",
            "session_3": [turn("D3:1", "Mia", "We bought a blue sofa.")],
        },
        "observation": {
            "session_1_observation": {
                "Mia": [[f"Mia adopted a puppy {LONG}", "D1:1"]],  # nothing observes D1:3
                "Leo": [[f"Leo learns the violin {LONG}", "D1:2"]],
            },
            "session_2_observation": {
                "Mia": [["Biscuit chewed Mia's shoes.", "D2:1"]],
                # Covers a turn of the first session too.
                "Leo": [["Leo's violin teacher moved to Lisbon.", ["D2:2", "D1:2"]]],
            },
            "session_3_observation": {"Mia": [["Mia bought a blue sofa.", "D3:1"]]},
        },
        "qa": [
            # Observations: D1:3 covered by none (reachable 2/3), D1:1 only by a long line.
            {"question": "What did Mia do?", "evidence": ["D1:1", "D1:3", "D2:1"], "category": 4},
            # Observations: both covered by the short one of session 2; turns: D1:2 long.
            {"question": "Who plays the violin?", "evidence": ["D1:2", "D2:2"], "category": 1},
            # Two ids in one string, one zero-padded.
            {"question": "What was bought?", "evidence": ["D3:1; D2:01"], "category": 2},
            {"question": "What did Leo say of Mars?", "evidence": ["D2:2"], "category": 5},
        ],
    }
]
# Wide enough for every line; and room for the fixed parts and the short lines but not
# one of the long ones.
WIDE = 50_000
SMALL = 250


@pytest.fixture
def data(tmp_path: Path) -> Path:
    path = tmp_path / "context-locomo.json"
    path.write_text(json.dumps(CONVERSATION))
    return path


def test_hits_are_the_share_of_the_evidence_shown() -> None:
    coverage = {"a": frozenset({"D1:1", "D1:2"}), "b": frozenset({"D1:2"}), "c": frozenset()}
    evidence = frozenset({"D1:1", "D1:2", "D2:1"})
    assert context.hit(evidence, ["a"], coverage) == pytest.approx(2 / 3)
    assert context.hit(evidence, ["b", "c", "unknown"], coverage) == pytest.approx(1 / 3)
    assert context.hit(evidence, ["b", "a", "b"], coverage) == pytest.approx(2 / 3)
    assert context.hit(evidence, [], coverage) == 0.0


def test_growing_asks_each_question_after_its_evidence_at_a_seeded_moment(data: Path) -> None:
    benchmark = locomo.build(locomo.read_dataset(data), "observation")
    moments = context.growing_moments(benchmark)["conv-c"]
    assert [m.at for m in moments] == [
        datetime(2023, 5, 8, 13, 56, tzinfo=UTC),
        datetime(2023, 5, 20, 10, tzinfo=UTC),
        datetime(2023, 6, 2, 9, tzinfo=UTC),
        datetime(2023, 6, 3, 9, tzinfo=UTC),  # a day after the last session
    ]
    asked = {q.key: m.at for m in moments for q in m.questions}
    assert set(asked) == {"conv-c:q000", "conv-c:q001", "conv-c:q002"}
    assert asked["conv-c:q000"] > moments[1].at  # D2:1 is the second session's
    assert asked["conv-c:q001"] > moments[1].at  # D2:2 too
    assert asked["conv-c:q002"] == moments[3].at  # D3:1 the last one's
    # The same seed, the same moments; the choice is among the later ones only.
    again = context.growing_moments(benchmark)["conv-c"]
    assert [[q.key for q in m.questions] for m in again] == [
        [q.key for q in m.questions] for m in moments
    ]


def test_the_replay_counts_what_each_payload_shows(data: Path) -> None:
    report: dict[str, Any] = context.run(data_path=data, budgets=(WIDE, SMALL))

    observations, turns = report["observation"], report["turn"]
    assert (observations["memories"], observations["questions"]) == (5, 3)
    assert (turns["memories"], turns["questions"]) == (6, 3)
    # Observations: q0 2/3 (D1:3 observed by none), q1 and q2 all; turns: every id is one.
    assert observations["reachable"] == pytest.approx(round((2 / 3 + 2) / 3, 4))
    assert turns["reachable"] == 1.0
    for protocol in context.PROTOCOLS:
        wide, small = (observations[protocol][str(b)] for b in (WIDE, SMALL))
        # Everything fits: every question sees all it can.
        assert wide["hit_rate"] == observations["reachable"]
        assert turns[protocol][str(WIDE)]["hit_rate"] == 1.0
        # No long line fits: q0 sees D2:1 alone; q1 both ids through the short
        # observation of session 2; q2 both.
        assert small["hit_rate"] == pytest.approx(round((1 / 3 + 2) / 3, 4))
        # Turns: q0 D2:1 alone, q1 D2:2 but not D1:2, q2 both.
        assert turns[protocol][str(SMALL)]["hit_rate"] == pytest.approx(
            round((1 / 3 + 1 / 2 + 1) / 3, 4)
        )
        for unit in (observations, turns):
            for row in unit[protocol].values():
                assert row["questions"] == 3
                assert row["over_budget"] == 0
    # Static: one payload before the three questions, so the hits per 1k tokens are the
    # three questions' hits over that payload's tokens.
    small = observations["static"][str(SMALL)]
    assert small["payloads"] == 1
    assert small["tokens_mean"] <= SMALL
    assert small["hits_per_1k_tokens"] == pytest.approx(
        1000 * (1 / 3 + 2) / small["tokens_mean"], abs=1e-4
    )
    wide_turns = turns["static"][str(WIDE)]
    assert wide_turns["hits_per_1k_tokens"] == pytest.approx(
        1000 * 3 / wide_turns["tokens_mean"], abs=1e-4
    )
    # The wide payload holds the three long lines (some 70 tokens each); the small one
    # none of them.
    small_turns = turns["static"][str(SMALL)]
    assert wide_turns["tokens_mean"] - small_turns["tokens_mean"] > 3 * 50
