import time

import pytest

from bench.timing import RunPlan, measure, percentile, summarise


def test_percentiles_interpolate_between_ranks() -> None:
    values = [4.0, 1.0, 3.0, 2.0]
    assert percentile(values, 0.5) == 2.5
    assert percentile(values, 0.95) == pytest.approx(3.85)
    assert percentile(values, 0.0) == 1.0
    assert percentile(values, 1.0) == 4.0
    assert percentile([7.0], 0.99) == 7.0


def test_summary_of_a_hundred_samples() -> None:
    summary = summarise([float(i) for i in range(1, 101)])
    assert summary.runs == 100
    assert summary.median_ms == 50.5
    assert summary.p95_ms == pytest.approx(95.05)
    assert summary.p99_ms == pytest.approx(99.01)
    assert (summary.min_ms, summary.max_ms, summary.mean_ms) == (1.0, 100.0, 50.5)


def test_measure_warms_up_first_and_respects_the_run_limits() -> None:
    seen: list[int] = []
    samples = measure(seen.append, RunPlan(warmup=3, min_runs=5, max_runs=8, budget_s=0.0))
    assert len(samples) == 5  # the zero budget is spent at once, so the minimum decides
    assert seen == list(range(8))
    samples = measure(seen.append, RunPlan(warmup=0, min_runs=2, max_runs=4, budget_s=60.0))
    assert len(samples) == 4


def test_a_slow_operation_stops_after_fewer_runs() -> None:
    samples = measure(lambda run: None, RunPlan(warmup=0, min_runs=30, budget_s=1.0))
    assert 30 <= len(samples) <= 300  # fast: at least the minimum
    slow = RunPlan(warmup=0, min_runs=30, budget_s=0.001, slow_min_runs=5)
    samples = measure(lambda run: time.sleep(0.003), slow)
    assert len(samples) == 5  # ten budgets spent after a few runs
