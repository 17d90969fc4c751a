import json
import math
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bench import locomo
from bench.shared import locomo_dev_split, missing_reference, reference_scorer
from tests.conftest import require_tool

REFERENCE = reference_scorer()
DEV_SPLIT = locomo_dev_split()
# The reference README's dev-split figures: (R@5, R@10, MRR@10).
PUBLISHED = {
    ("word overlap", "observation"): (0.477, 0.521, 0.435),
    ("BM25", "observation"): (0.489, 0.536, 0.451),
    ("word overlap", "turn"): (0.483, 0.548, 0.413),
    ("BM25", "turn"): (0.519, 0.584, 0.425),
}

COVERAGE = {
    "a": frozenset({"D1:1"}),
    "b": frozenset({"D1:2"}),
    "c": frozenset({"D2:1", "D2:2"}),
    "x": frozenset(),
}
EVIDENCE = frozenset({"D1:2", "D2:2"})


def test_evidence_ids_are_normalised() -> None:
    assert locomo.dialogue_ids("D8:6; D9:17") == ["D8:6", "D9:17"]
    assert locomo.dialogue_ids(["D:11:26", "D30:05", "D"]) == ["D11:26", "D30:5"]
    assert locomo.dialogue_ids("D9:1 D4:4 D4:6") == ["D9:1", "D4:4", "D4:6"]
    assert locomo.dialogue_ids(["D1:3", "D1:3"]) == ["D1:3"]


def test_recall_and_mrr_of_a_hand_ranked_list() -> None:
    scores = locomo.score_question(["x", "b", "unknown", "c"], EVIDENCE, COVERAGE)
    assert scores == {"R@5": 1.0, "R@10": 1.0, "MRR@10": 0.5}


def test_evidence_found_late_counts_only_for_the_deeper_cutoff() -> None:
    ranked = ["x", "a", "p", "q", "r", "s", "b"]
    scores = locomo.score_question(ranked, EVIDENCE, COVERAGE)
    assert scores["R@5"] == 0.0
    assert scores["R@10"] == 0.5
    assert scores["MRR@10"] == pytest.approx(1 / 7)


def test_duplicates_count_once_and_nothing_past_rank_ten_scores() -> None:
    assert locomo.score_question(["x", "x", "x", "b"], EVIDENCE, COVERAGE)["MRR@10"] == 0.5
    late = [f"n{i}" for i in range(10)] + ["b", "c"]
    assert locomo.score_question(late, EVIDENCE, COVERAGE) == {
        "R@5": 0.0,
        "R@10": 0.0,
        "MRR@10": 0.0,
    }


def test_means_are_taken_per_category_and_overall() -> None:
    when = datetime(2023, 5, 8, tzinfo=UTC)
    memories = [
        locomo.UnitMemory(k, "c1", i, when, k, k, sources)
        for i, (k, sources) in enumerate(COVERAGE.items())
    ]
    questions = [
        locomo.Question("c1:q0", "c1", "?", "single-hop", when, frozenset({"D1:1"})),
        locomo.Question("c1:q1", "c1", "?", "single-hop", when, EVIDENCE),
        locomo.Question("c1:q2", "c1", "?", "temporal", when, frozenset({"D2:1"})),
    ]
    benchmark = locomo.Benchmark("turn", memories, questions)
    table = locomo.score(benchmark, {"c1:q0": ["a"], "c1:q1": ["x", "b"]})
    assert table["single-hop"] == {"n": 2, "R@5": 0.75, "R@10": 0.75, "MRR@10": 0.75}
    assert table["temporal"] == {"n": 1, "R@5": 0.0, "R@10": 0.0, "MRR@10": 0.0}
    assert table["overall"] == {"n": 3, "R@5": 0.5, "R@10": 0.5, "MRR@10": 0.5}
    assert list(table) == ["single-hop", "temporal", "overall"]


def test_a_session_date_time_is_read_as_utc() -> None:
    assert locomo.session_moment(" 1:56 pm on 8 May, 2023 ") == datetime(
        2023, 5, 8, 13, 56, tzinfo=UTC
    )


def test_bm25_matches_a_hand_computed_example() -> None:
    index = locomo.BM25([["red", "apple"], ["green", "apple", "apple"], ["blue"]])
    idf = math.log(1 + (3 - 2 + 0.5) / (2 + 0.5))
    first, second, third = index.scores(["apple"])
    assert first == pytest.approx(idf * 1 * 2.5 / (1 + 1.5 * (0.25 + 0.75 * 2 / 2)))
    assert second == pytest.approx(idf * 2 * 2.5 / (2 + 1.5 * (0.25 + 0.75 * 3 / 2)))
    assert third == 0.0


def test_word_overlap_prefers_more_shared_words_then_focused_memories() -> None:
    when = datetime(2023, 5, 8, tzinfo=UTC)
    memories = [
        locomo.UnitMemory(
            "m0", "c", 0, when, "Mia likes green tea and long walks", "", frozenset()
        ),
        locomo.UnitMemory("m1", "c", 1, when, "Mia drinks green tea", "", frozenset()),
        locomo.UnitMemory("m2", "c", 2, when, "Tea is nice", "", frozenset()),
        locomo.UnitMemory("m3", "c", 3, when, "Nothing related here", "", frozenset()),
    ]
    rank = locomo.overlap_ranker(memories)
    question = locomo.Question(
        "q", "c", "What green tea does Mia drink?", "single-hop", when, frozenset()
    )
    assert rank(question) == ["m1", "m0", "m2", "m3"]


def test_stop_words_and_punctuation_are_not_words() -> None:
    assert locomo.words("When did Caroline's dog, Luna, run?") == ["caroline", "dog", "luna", "run"]


def _reference_available() -> None:
    reason = missing_reference()
    require_tool(reason is None, reason or "")


def test_without_the_shared_material_the_skip_says_what_is_missing_and_where_to_put_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TAPROOT_SHARED_DIR", str(tmp_path))
    monkeypatch.delenv("CI", raising=False)  # in CI a missing tool fails instead

    with pytest.raises(pytest.skip.Exception) as skipped:
        _reference_available()

    reason = str(skipped.value)
    assert reason == missing_reference()
    for words in (
        "shared benchmark material",
        "outside the repository",
        "LoCoMo reference scorer and development split",
        f"bench/locomo_eval_reference.py, data/locomo/locomo-dev.json not found in {tmp_path}",
        "beside the checkout as ../shared",
        "TAPROOT_SHARED_DIR",
    ):
        assert words in reason

    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "locomo_eval_reference.py").write_text("")
    assert f"(data/locomo/locomo-dev.json not found in {tmp_path})" in (missing_reference() or "")
    (tmp_path / "data" / "locomo").mkdir(parents=True)
    (tmp_path / "data" / "locomo" / "locomo-dev.json").write_text("[]")
    assert missing_reference() is None


@pytest.mark.parametrize("unit", locomo.UNITS)
def test_baselines_reproduce_the_reference_figures(unit: str, tmp_path: Path) -> None:
    _reference_available()
    benchmark = locomo.build(locomo.read_dataset(DEV_SPLIT), unit)
    for name, factory in locomo.BASELINES.items():
        results = locomo.run_ranker(benchmark, factory)
        path = tmp_path / f"{name}.jsonl"
        locomo.write_results(path, results)
        out = tmp_path / f"{name}.json"
        done = subprocess.run(
            [sys.executable, str(REFERENCE), "score", "--unit", unit, "--data", str(DEV_SPLIT),
             "--results", str(path), "--json-out", str(out)],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        reference = json.loads(out.read_text())["system"]["metrics"]["overall"]
        ours = locomo.score(benchmark, results)["overall"]
        published = dict(zip(("R@5", "R@10", "MRR@10"), PUBLISHED[(name, unit)], strict=True))
        for metric, figure in published.items():
            assert abs(reference[metric] - figure) <= 0.005, (name, unit, metric)
            assert abs(ours[metric] - reference[metric]) <= 0.0005, (name, unit, metric)
        assert reference["n"] == ours["n"] == 760
