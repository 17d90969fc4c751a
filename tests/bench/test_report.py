from typing import Any

from bench import report
from bench.__main__ import add_transport_overhead
from bench.report import over_http, retrieval, service


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


def _run(
    size: int, reflect_ms: float, common_ms: float, *, tokens: int = 7990, lines: int = 90
) -> dict[str, Any]:
    return {
        "backend": "sqlite",
        "size": size,
        "store": {"token_rows": 10 * size, "load_seconds": 1.0},
        "reflect_payload": {
            "kb": 31.2,
            "tokens": tokens,
            "max_tokens": 8000,
            "core_count": 2,
            "core_in_full": 1,
            "core_as_lines": 1,
            "core_omitted": 0,
            "catalog_lines": lines,
            "catalog_cut_by_budget": 10,
        },
        "migrate_available": True,
        "operations": [
            _op("reflect", reflect_ms),
            _op("status", reflect_ms + 10),
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
    targets = service.targets_section(results)
    reflect = next(line for line in targets.splitlines() if "| reflect |" in line)
    assert "met (1.2× headroom)" in reflect  # 20 ms against 25 ms in process
    assert "met (1.5× headroom)" in reflect  # 26.5 ms against 40 ms over HTTP
    common = next(line for line in targets.splitlines() if "common words" in line)
    assert "**missed** (2.0× over)" in common  # 30 ms against 15 ms


def test_growth_marks_what_is_over_four_times_and_what_is_candidate_bound() -> None:
    growth = service.growth_section(_results())
    assert "| reflect | 20.0 | 100 | 5.0× |  | **over 4×** |" in growth
    assert (
        "| recall, 3-word query, common words | 30.0 | 300 | 10.0× | 400 → 400 | candidate-bound |"
        in growth
    )


def test_the_whole_report_renders() -> None:
    text = report.render(_results())
    assert text.startswith("# Taproot benchmark results")
    assert "## Retrieval quality (LoCoMo)" in text


def _rows(section: str, measure: str) -> list[str]:
    return [line for line in section.splitlines() if measure in line]


def test_the_economy_targets_judge_the_budget_at_every_size_and_the_lines_per_token() -> None:
    results = _results()
    results["service"] = [
        _run(1_000, 5.0, 5.0, tokens=7_998, lines=140),  # 17.50 per 1,000: 1.31× before
        _run(10_000, 12.0, 10.0),
        _run(100_000, 14.0, 30.0, tokens=8_001),
    ]

    section = service.economy_section(results)

    budget = _rows(section, "| payload tokens |")
    assert [row.split(" | ")[1] for row in budget] == ["1,000", "10,000", "100,000"]
    assert budget[0].endswith("| ≤ 8,000 | 7,998 | met |")
    assert budget[2].endswith("| ≤ 8,000 | 8,001 | **missed** |")
    (lines,) = _rows(section, "catalog lines per 1,000 payload tokens")
    assert "before: 13.41, 107 lines in 7,979 tokens" in lines  # measured at f83a154
    assert lines.endswith("| ≥ 16.76 | 17.50 (1.31× before) | met |")
    (reflect,) = _rows(section, "reflect median")
    assert reflect.endswith("| ≤ 15 | 12.0 | met (1.2× headroom) |")
    (status,) = _rows(section, "status median")
    assert status.endswith("| ≤ 25 | 22.0 | met (1.1× headroom) |")


def test_fewer_lines_per_token_than_the_gain_asks_is_missed() -> None:
    results = _results()
    results["service"] = [_run(1_000, 5.0, 5.0, tokens=8_000, lines=110)]
    (lines,) = _rows(service.economy_section(results), "catalog lines per 1,000")
    assert lines.endswith("| 13.75 (1.03× before) | **missed** |")


def test_the_payload_table_shows_tokens_against_the_budget_and_how_core_was_sent() -> None:
    section = service.service_section(_results())
    assert "| 10,000 | 31.2 KB | 7,990 / 8,000 | 1 / 1 / 0 | 90 | 10 |" in section


def test_transport_overhead_is_per_operation_and_per_database() -> None:
    results = _results()
    postgres = {**_run(10_000, 12.0, 18.0), "backend": "postgresql"}
    results["service"].append(postgres)
    results["http"]["latency"] = [
        {"backend": "sqlite", "tool": "reflect", "runs": 40, "median_ms": 26.5, "p95_ms": 30.0},
        {"backend": "postgresql", "tool": "reflect", "runs": 40, "median_ms": 15.0, "p95_ms": 20.0},
        {"backend": "postgresql", "tool": "recall, 3-word query, common words", "runs": 40,
         "median_ms": 21.5, "p95_ms": 25.0},
        {"backend": "sqlite", "tool": "forget", "runs": 40, "median_ms": 30.0, "p95_ms": 31.0},
    ]  # fmt: skip
    add_transport_overhead(results["http"], results["service"], 10_000)
    overheads = [row.get("overhead_ms") for row in results["http"]["latency"]]
    # Against the same operation on the same database at the HTTP store's size (never the
    # 100,000-memory run); an operation measured only over HTTP gets none.
    assert overheads == [6.5, 3.0, 3.5, None]


def test_the_profile_section_lists_each_databases_largest_costs() -> None:
    results = _results()
    results["http"]["profiles"] = [
        {"backend": "sqlite", "operation": "recall by ids (5)", "calls": 900, "samples": 4000,
         "raw": "profile.txt", "costs": [["MCP SDK", 40.0], ["strengthening write", 12.5]]},
        {"backend": "postgresql", "operation": "recall by ids (5)",
         "unavailable": "py-spy is not installed"},
    ]  # fmt: skip
    section = over_http.profile_section(results)
    assert "**SQLite**, recall by ids (5): 900 calls, 4,000 samples" in section
    assert "| MCP SDK | 40.0 % |" in section
    assert "| strengthening write | 12.5 % |" in section
    assert "PostgreSQL: not profiled (py-spy is not installed)." in section
    assert "## Where a call over HTTP spends its time" in report.render(results)


def _system(r5: float, r10: float, mrr: float) -> dict[str, Any]:
    return {"scores": {"overall": {"n": 760, "R@5": r5, "R@10": r10, "MRR@10": mrr}}}


def _retrieval(replayed_r10: float, cold_first: float) -> dict[str, Any]:
    counts = {"memories": 1210, "max": 40, "p99": 27, "p90": 14, "never_recalled": 104,
              "top10_places": 7000, "half_of_places_held_by": 253}  # fmt: skip
    probes = {
        "after_replay": {"n": 25, "cold_first": cold_first, "hot_above_cold": 0.0},
        "after_reset": {"n": 25, "cold_first": 1.0, "hot_above_cold": 0.0},
    }
    thirds = [{"n": 250, "R@10": 0.5}, {"n": 255, "R@10": 0.6}, {"n": 255, "R@10": 0.7}]
    return {
        "units": {
            "observation": {
                "memories": 1210,
                "conversations": 5,
                "questions": 760,
                "systems": {
                    "Taproot": _system(0.566, 0.616, 0.535),
                    "Taproot, replayed": _system(0.555, replayed_r10, 0.529),
                },
            }
        },
        "replay": {
            "observation": {
                "counts": {"Taproot, replayed": counts},
                "probes": {"Taproot, replayed": probes},
                "terciles": {"Taproot, replayed": thirds},
            }
        },
    }


def test_the_replay_is_shown_beside_the_static_ranking_with_what_it_left() -> None:
    text = retrieval.retrieval_section({"retrieval": _retrieval(0.614, 1.0)})
    assert "| Taproot | 0.616 | 0.555 / 0.614 / 0.529 | -0.002 | 0.500 / 0.600 / 0.700 |" in text
    assert (
        "| Taproot | 40 | 27 | 14 | 104 of 1,210 | 253 | 1.00 / 1.00 | 0.00 / 0.00 | 25 |" in text
    )
    # The replayed system gets no column of its own in the static table.
    assert "Taproot, replayed: R@5" not in text


def test_the_replay_targets_are_judged_for_taproot_as_shipped() -> None:
    met = retrieval.replay_targets_section({"retrieval": _retrieval(0.614, 0.92)})
    assert _rows(met, "replayed R@10 ≥ static − 0.02") == [
        "| observation | replayed R@10 ≥ static − 0.02 | ≥ 0.596 | 0.614 | met |"
    ]
    assert "| observation | cold_first, after the replay | ≥ 0.9 | 0.92 (25 probes) | met |" in met
    missed = retrieval.replay_targets_section({"retrieval": _retrieval(0.590, 0.40)})
    assert _rows(missed, "**missed**") == [
        "| observation | replayed R@10 ≥ static − 0.02 | ≥ 0.596 | 0.590 | **missed** |",
        "| observation | cold_first, after the replay | ≥ 0.9 | 0.40 (25 probes) | **missed** |",
    ]
    assert retrieval.replay_targets_section({}) == "Not measured."


def test_the_http_section_shows_each_burst_row() -> None:
    results = _results()
    results["http"]["bursts"] = [
        {"backend": "sqlite", "workers": 1, "bursts": 5, "calls": 140, "failed": 0,
         "burst_median_ms": 412.0, "burst_max_ms": 530.5, "call_median_ms": 201.0,
         "call_max_ms": 498.2},
    ]  # fmt: skip
    section = over_http.http_section(results)
    assert "| calls | failed | burst median ms |" in section
    assert "| SQLite | 1 | 140 | 0 | 412 | 530 | 201 | 498 |" in section


def test_throughput_rows_show_their_p99_and_a_dash_where_a_run_kept_none() -> None:
    """The target of issue 32 bounds the p99 of throughput runs; runs kept before it was
    recorded still render."""
    results = _results()
    row = {
        "backend": "sqlite",
        "mix": "recall",
        "workers": 2,
        "clients": 16,
        "calls_per_second": 63.5,
        "median_ms": 241.0,
        "p95_ms": 433.7,
        "errors": 0,
    }
    results["http"]["throughput"] = [row | {"p99_ms": 512.25}, row | {"clients": 4}]
    section = over_http.http_section(results)
    assert "| median ms | p95 ms | p99 ms | errors |" in section
    assert "| SQLite | recall | 2 | 16 | 64 | 241 | 434 | 512 | 0 |" in section
    assert "| SQLite | recall | 2 | 4 | 64 | 241 | 434 | – | 0 |" in section


def test_minilm_is_held_to_its_own_targets_when_it_was_measured() -> None:
    measured = _retrieval(0.617, 1.0)
    systems = measured["units"]["observation"]["systems"]
    systems["Taproot, MiniLM"] = _system(0.6, 0.644, 0.55)
    systems["Taproot, MiniLM, replayed"] = _system(0.6, 0.610, 0.55)
    text = retrieval.minilm_targets_section({"retrieval": measured})
    assert "| observation | static R@10 | ≥ 0.640 | 0.644 | met |" in text
    assert (
        "| observation | replayed R@10 no lower than the default embedder's | ≥ 0.617 "
        "| 0.610 | **missed** |" in text
    )
    assert retrieval.minilm_targets_section({"retrieval": _retrieval(0.617, 1.0)}).startswith(
        "Not measured"
    )


def test_the_context_replay_is_tabled_per_unit_protocol_and_budget() -> None:
    results = _results()
    assert retrieval.context_section(results) == "Not run."
    row = {"hit_rate": 0.5, "hits_per_1k_tokens": 0.75, "tokens_mean": 1990.4, "over_budget": 0}
    results["context"] = {
        "observation": {
            "memories": 1210,
            "questions": 760,
            "conversations": 5,
            "reachable": 0.785,
            "static": {"2000": row},
            "growing": {"2000": {**row, "hit_rate": 0.25}},
        }
    }
    section = retrieval.context_section(results)
    assert "**observation unit**: 1,210 memories in 5 stores, 760 questions" in section
    assert "reachable (every memory shown) 0.785" in section
    assert "| static | 2,000 | 0.500 | 0.750 | 1,990 | 0 |" in section
    assert "| growing | 2,000 | 0.250 | 0.750 | 1,990 | 0 |" in section
    assert "turn unit" not in section
    assert "## What Claude sees at the start (issue 33)" in report.render(results)
