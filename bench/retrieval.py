"""Retrieval quality on LoCoMo through Taproot's real ranking code (call after
`bench.database.setup_django`).

Each conversation becomes its own user's store (category episodic, salience medium,
gist = first 15 words, created and updated at the session's date), written by the bulk
loader that tests/bench proves equal to the services. Every question then goes through
`memories.services.recall.rank_memories` — the ranking `taproot_recall` uses, but
read-only, so no question strengthens what the next one sees.
"""

import time
import uuid
from datetime import UTC
from pathlib import Path
from typing import Any

from bench import locomo
from bench.database import analyze
from bench.loading import ensure_users, load_bulk
from bench.synthetic import SyntheticMemory
from memories.services.recall import parse_filters, rank_memories

DEPTH = 50


def memory_id(unit: str, conversation_number: int, seq: int) -> uuid.UUID:
    """Deterministic ids that sort like the conversation's own order, so exact ties (same
    session, same relevance) fall back to the order things were said."""
    unit_number = locomo.UNITS.index(unit) + 1
    return uuid.UUID(int=(unit_number << 96) | (conversation_number << 64) | seq)


def load(benchmark: locomo.Benchmark) -> tuple[dict[str, Any], dict[uuid.UUID, str]]:
    """One user per conversation; returns the users and stored id → memory key."""
    grouped = benchmark.by_conversation()
    conversations = list(grouped)
    owner_of = {conv: f"locomo-{benchmark.unit}-{conv}" for conv in conversations}
    users = ensure_users(owner_of.values())
    keys: dict[uuid.UUID, str] = {}
    rows: list[SyntheticMemory] = []
    for number, conv in enumerate(conversations, 1):
        for memory in grouped[conv]:
            stamp = memory.created_at.replace(tzinfo=UTC)
            pk = memory_id(benchmark.unit, number, memory.seq)
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
            parse_filters(query=question.text, limit=DEPTH),
            now=question.asked_at.replace(tzinfo=UTC),
        )
        results[question.key] = [keys[item.candidate.id] for item in ranking.ranked]
    return results


def run(*, data_path: Path, out_dir: Path) -> dict[str, Any]:
    """Every unit: Taproot's ranking and both baselines, scored; ranked lists written as
    JSON lines (`<system>-<unit>.jsonl`) for the reference scorer."""
    data = locomo.read_dataset(data_path)
    report: dict[str, Any] = {"data": str(data_path), "units": {}}
    for unit in locomo.UNITS:
        benchmark = locomo.build(data, unit)
        started = time.perf_counter()
        owners, keys = load(benchmark)
        loaded = time.perf_counter() - started
        started = time.perf_counter()
        systems = {"Taproot": taproot_results(benchmark, owners, keys)}
        per_query_ms = 1000 * (time.perf_counter() - started) / max(1, len(benchmark.questions))
        for name, factory in locomo.BASELINES.items():
            systems[name] = locomo.run_ranker(benchmark, factory, depth=DEPTH)
        unit_report: dict[str, Any] = {
            "memories": len(benchmark.memories),
            "questions": len(benchmark.questions),
            "conversations": len(owners),
            "load_seconds": round(loaded, 2),
            "taproot_ms_per_question": round(per_query_ms, 2),
            "systems": {},
        }
        for name, results in systems.items():
            path = out_dir / f"{name.lower().replace(' ', '-')}-{unit}.jsonl"
            locomo.write_results(path, results)
            unit_report["systems"][name] = {
                "results": str(path),
                "scores": locomo.score(benchmark, results),
                "returned_fewer_than_10": sum(len(r) < 10 for r in results.values()),
            }
        report["units"][unit] = unit_report
    return report
