from typing import Any

from bench import report
from bench.__main__ import add_transport_overhead


def _op(name: str, median: float, **extra: Any) -> dict[str, Any]:
    return {
        "operation": name,
        "group": "x",
        "band": extra.get("band"),
        "query_words": None,
        "candidates": extra.get("candidates"),
        "sql_queries": 3,
        "runs": 50,
        "median_ms": median,
        "p95_ms": median * 2,
        "p99_ms": median * 3,
        "mean_ms": median,
        "min_ms": median,
        "max_ms": median * 3,
    }


def _run(size: int, reflect_ms: float, common_ms: float) -> dict[str, Any]:
    return {
        "backend": "sqlite",
        "size": size,
        "store": {"token_rows": 10 * size, "load_seconds": 1.0},
        "reflect_payload": {
            "kb": 31.2,
            "tokens": 7990,
            "core_count": 2,
            "catalog_lines": 90,
            "catalog_cut_by_budget": 10,
        },
        "migrate_available": True,
        "operations": [
            _op("reflect", reflect_ms),
            _op("recall, 3-word query, common words", common_ms, band="common", candidates=400.0),
        ],
    }


def _results() -> dict[str, Any]:
    return {
        "profile": "full",
        "started_at": "2026-11-29T00:00:00+00:00",
        "command": "python -m bench --full",
        "machine": {"CPU": "test", "cores": "2"},
        "service": [_run(10_000, 20.0, 30.0), _run(100_000, 100.0, 300.0)],
        "http": {
            "latency": [
                {"backend": "sqlite", "tool": "reflect", "runs": 40, "median_ms": 26.5,
                 "p95_ms": 30.0, "errors": 0},
            ],
            "throughput": [],
        },
        "notes": [],
    }  # fmt: skip


def test_transport_overhead_is_http_median_minus_service_median() -> None:
    results = _results()
    add_transport_overhead(results["http"], results["service"], 10_000)
    row = results["http"]["latency"][0]
    assert row["service_median_ms"] == 20.0
    assert row["overhead_ms"] == 6.5


def test_targets_say_met_with_headroom_or_missed() -> None:
    results = _results()
    add_transport_overhead(results["http"], results["service"], 10_000)
    targets = report.targets_section(results)
    reflect = next(line for line in targets.splitlines() if "| reflect |" in line)
    assert "met (1.2× headroom)" in reflect  # 20 ms against 25 ms in process
    assert "met (1.5× headroom)" in reflect  # 26.5 ms against 40 ms over HTTP
    common = next(line for line in targets.splitlines() if "common words" in line)
    assert "**missed** (2.0× over)" in common  # 30 ms against 15 ms


def test_growth_marks_what_is_over_four_times_and_what_is_candidate_bound() -> None:
    growth = report.growth_section(_results())
    assert "| reflect | 20.0 | 100 | 5.0× |  | **over 4×** |" in growth
    assert (
        "| recall, 3-word query, common words | 30.0 | 300 | 10.0× | 400 → 400 | candidate-bound |"
        in growth
    )


def test_the_whole_report_renders() -> None:
    text = report.render(_results())
    assert text.startswith("# Taproot benchmark results")
    assert "## Retrieval quality (LoCoMo)" in text
