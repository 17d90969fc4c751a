"""Repeat an operation after a warm-up and summarise its latencies."""

import gc
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class RunPlan:
    warmup: int = 5
    min_runs: int = 30
    max_runs: int = 300
    budget_s: float = 3.0
    # Operations slower than budget_s / min_runs × 10 stop after this many runs once ten
    # budgets are spent (a candidate-bound operation at 100,000 memories), so one
    # operation cannot take minutes; the run count is reported with every figure.
    slow_min_runs: int = 5


@dataclass(frozen=True)
class Summary:
    runs: int
    median_ms: float
    p95_ms: float
    p99_ms: float
    mean_ms: float
    min_ms: float
    max_ms: float

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def percentile(values: Sequence[float], share: float) -> float:
    """The `share` quantile (0–1) with linear interpolation between closest ranks."""
    if not values:
        raise ValueError("no values")
    ordered = sorted(values)
    position = (len(ordered) - 1) * share
    low = math.floor(position)
    high = math.ceil(position)
    if low == high:
        return ordered[low]
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def summarise(samples_ms: Sequence[float]) -> Summary:
    return Summary(
        runs=len(samples_ms),
        median_ms=round(percentile(samples_ms, 0.5), 3),
        p95_ms=round(percentile(samples_ms, 0.95), 3),
        p99_ms=round(percentile(samples_ms, 0.99), 3),
        mean_ms=round(sum(samples_ms) / len(samples_ms), 3),
        min_ms=round(min(samples_ms), 3),
        max_ms=round(max(samples_ms), 3),
    )


def measure(operation: Callable[[int], object], plan: RunPlan) -> list[float]:
    """Milliseconds per call. `operation` gets the run number (warm-up runs come first).

    Runs at least `min_runs` times and at most `max_runs`, stopping early once `budget_s`
    seconds of measured time have passed — or, for a slow operation, after `slow_min_runs`
    runs once ten times `budget_s` have passed.
    """
    for run in range(plan.warmup):
        operation(run)
    gc.collect()
    samples: list[float] = []
    spent = 0.0
    run = plan.warmup
    while len(samples) < plan.max_runs:
        started = time.perf_counter()
        operation(run)
        elapsed = time.perf_counter() - started
        samples.append(elapsed * 1000)
        spent += elapsed
        run += 1
        if len(samples) >= plan.min_runs and spent >= plan.budget_s:
            break
        if len(samples) >= plan.slow_min_runs and spent >= 10 * plan.budget_s:
            break
    return samples
