"""The sections of retrieval quality on LoCoMo (bench.retrieval, bench.replay): each
ranking static and replayed as real use, the targets of issues 20 and 25, and what
reflect shows of what the conversations go on to ask (bench.context)."""

from typing import Any

from bench.report.tables import table, verdict_at_least

REPLAYED = ", replayed"  # bench.retrieval.REPLAYED (this module imports no Django code)
# Issue 20's targets: replayed R@10 at most this far below static, static R@10 no lower
# than the figures before that issue by more than the tolerance, and the probes' share.
REPLAY_GAP = 0.02
STATIC_BEFORE = {"observation": 0.616, "turn": 0.642}
STATIC_TOLERANCE = 0.005
COLD_FIRST_TARGET = 0.9


def retrieval_section(results: dict[str, Any]) -> str:
    retrieval = results.get("retrieval")
    if not retrieval:
        return "Not run."
    parts = []
    if retrieval.get("activation"):
        parts.append(
            "Ranking constants overridden for this run: "
            + ", ".join(f"`{k}={v}`" for k, v in retrieval["activation"].items())
            + "."
        )
    for unit, unit_report in retrieval["units"].items():
        systems = {
            name: system
            for name, system in unit_report["systems"].items()
            if not name.endswith(REPLAYED)
        }
        heading = (
            f"**{unit} unit**: {unit_report['memories']:,} memories in "
            f"{unit_report['conversations']} stores, {unit_report['questions']} questions"
        )
        if "taproot_ms_per_question" in unit_report:
            heading += (
                f"; Taproot ranks in {unit_report['taproot_ms_per_question']} ms per question"
            )
        parts.append(heading + ".")
        if systems:
            categories = list(next(iter(systems.values()))["scores"])
            rows = []
            for category in categories:
                row: list[Any] = [category, next(iter(systems.values()))["scores"][category]["n"]]
                for system in systems.values():
                    s = system["scores"][category]
                    row.append(f"{s['R@5']:.3f} / {s['R@10']:.3f} / {s['MRR@10']:.3f}")
                rows.append(row)
            parts.append(
                table(
                    ["category", "n"] + [f"{name}: R@5 / R@10 / MRR@10" for name in systems], rows
                )
            )
        replay = retrieval.get("replay", {}).get(unit)
        if replay:
            parts.append(replay_tables(unit_report["systems"], replay))
    checks = retrieval.get("checks", [])
    if checks:
        parts.append("\n".join(f"- {line}" for line in checks))
    return "\n\n".join(parts)


def _overall(system: dict[str, Any] | None, metric: str) -> float | None:
    return None if system is None else float(system["scores"]["overall"][metric])


def _figure(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"


def replay_tables(systems: dict[str, Any], replay: dict[str, Any]) -> str:
    """Each ranking static and replayed as real use, and what the replay left behind."""
    scores, left = [], []
    for replayed in replay["counts"]:
        name = replayed.removesuffix(REPLAYED)
        static_r10 = _overall(systems.get(name), "R@10")
        overall = systems[replayed]["scores"]["overall"]
        thirds = " / ".join(f"{t['R@10']:.3f}" for t in replay["terciles"][replayed])
        scores.append(
            [
                name,
                _figure(static_r10),
                f"{overall['R@5']:.3f} / {overall['R@10']:.3f} / {overall['MRR@10']:.3f}",
                "–" if static_r10 is None else f"{overall['R@10'] - static_r10:+.3f}",
                thirds,
            ]
        )
        counts = replay["counts"][replayed]
        probes = replay["probes"][replayed]
        after, reset = probes["after_replay"], probes["after_reset"]
        left.append(
            [
                name,
                counts["max"],
                counts["p99"],
                counts["p90"],
                f"{counts['never_recalled']:,} of {counts['memories']:,}",
                counts["half_of_places_held_by"],
                f"{after['cold_first']:.2f} / {reset['cold_first']:.2f}",
                f"{after['hot_above_cold']:.2f} / {reset['hot_above_cold']:.2f}",
                after["n"],
            ]
        )
    return (
        table(
            [
                "ranking",
                "static R@10",
                "replayed R@5 / R@10 / MRR@10",
                "R@10 change",
                "replayed R@10 by third",
            ],
            scores,
        )
        + "\n\n"
        + table(
            [
                "after the replay",
                "most recalls",
                "p99",
                "p90",
                "never recalled",
                "memories holding half the top-10 places",
                "cold_first (replay / reset)",
                "hot_above_cold (replay / reset)",
                "probes",
            ],
            left,
        )
    )


def replay_targets_section(results: dict[str, Any]) -> str:
    """Issue 20's targets, for Taproot as shipped."""
    retrieval = results.get("retrieval") or {}
    rows = []
    for unit, unit_report in retrieval.get("units", {}).items():
        systems = unit_report["systems"]
        static_r10 = _overall(systems.get("Taproot"), "R@10")
        replayed_r10 = _overall(systems.get(f"Taproot{REPLAYED}"), "R@10")
        if static_r10 is not None and replayed_r10 is not None:
            rows.append(
                [unit, "replayed R@10 ≥ static − 0.02", f"≥ {static_r10 - REPLAY_GAP:.3f}",
                 f"{replayed_r10:.3f}", verdict_at_least(replayed_r10, static_r10 - REPLAY_GAP)]
            )  # fmt: skip
        if static_r10 is not None and unit in STATIC_BEFORE:
            floor = STATIC_BEFORE[unit] - STATIC_TOLERANCE
            rows.append(
                [unit, f"static R@10 no lower than {STATIC_BEFORE[unit]} − 0.005",
                 f"≥ {floor:.3f}", f"{static_r10:.3f}", verdict_at_least(static_r10, floor)]
            )  # fmt: skip
        probes = retrieval.get("replay", {}).get(unit, {}).get("probes", {})
        for moment, label in (("after_replay", "after the replay"), ("after_reset", "reset")):
            probe = probes.get(f"Taproot{REPLAYED}", {}).get(moment)
            if probe:
                rows.append(
                    [unit, f"cold_first, {label}", f"≥ {COLD_FIRST_TARGET}",
                     f"{probe['cold_first']:.2f} ({probe['n']} probes)",
                     verdict_at_least(probe["cold_first"], COLD_FIRST_TARGET)]
                )  # fmt: skip
    if not rows:
        return "Not measured."
    return table(("unit", "target", "needs", "measured", ""), rows)


# Issue 25's targets for Taproot with MiniLM on the development split: static R@10 at
# least these, and replayed no lower than the default embedder's replayed.
MINILM_STATIC_TARGETS = {"observation": 0.64, "turn": 0.69}


def minilm_targets_section(results: dict[str, Any]) -> str:
    """Issue 25's targets, for Taproot with MiniLM (when it was measured)."""
    retrieval = results.get("retrieval") or {}
    rows = []
    for unit, unit_report in retrieval.get("units", {}).items():
        systems = unit_report["systems"]
        static_r10 = _overall(systems.get("Taproot, MiniLM"), "R@10")
        if static_r10 is not None and unit in MINILM_STATIC_TARGETS:
            target = MINILM_STATIC_TARGETS[unit]
            rows.append(
                [unit, "static R@10", f"≥ {target:.3f}", f"{static_r10:.3f}",
                 verdict_at_least(static_r10, target)]
            )  # fmt: skip
        replayed = _overall(systems.get(f"Taproot, MiniLM{REPLAYED}"), "R@10")
        default = _overall(systems.get(f"Taproot{REPLAYED}"), "R@10")
        if replayed is not None and default is not None:
            rows.append(
                [unit, "replayed R@10 no lower than the default embedder's",
                 f"≥ {default:.3f}", f"{replayed:.3f}", verdict_at_least(replayed, default)]
            )  # fmt: skip
    if not rows:
        return "Not measured (the minilm extra is not installed, or retrieval was not run)."
    return table(("unit", "target", "needs", "measured", ""), rows)


def context_section(results: dict[str, Any]) -> str:
    """What reflect shows of what the conversations go on to ask (bench.context)."""
    context = results.get("context")
    if not context:
        return "Not run."
    headers = ["protocol", "budget", "hit rate", "hits per 1k tokens", "tokens (mean)", "over"]
    parts = []
    for unit in ("observation", "turn"):
        measured = context.get(unit)
        if not measured:
            continue
        rows = [
            [protocol, f"{int(budget):,}", f"{row['hit_rate']:.3f}",
             f"{row['hits_per_1k_tokens']:.3f}", f"{row['tokens_mean']:,.0f}", row["over_budget"]]
            for protocol in ("static", "growing")
            for budget, row in measured.get(protocol, {}).items()
        ]  # fmt: skip
        parts.append(
            f"**{unit} unit**: {measured['memories']:,} memories in {measured['conversations']} "
            f"stores, {measured['questions']} questions; reachable (every memory shown) "
            f"{measured['reachable']:.3f}."
        )
        parts.append(table(headers, rows))
    return "\n\n".join(parts)
