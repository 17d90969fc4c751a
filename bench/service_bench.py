"""Service-level latency, in process: every operation the tools perform, timed on a
synthetic store of a given size (call after `bench.database.setup_django`)."""

import cProfile
import gc
import io
import pstats
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from django.db import connection
from django.db.models import F
from django.test import override_settings
from django.test.utils import CaptureQueriesContext

from bench.database import analyze, checkpoint
from bench.loading import ensure_users, load_bulk
from bench.queries import BANDS, QUERY_SIZES, QueryPools, query_pools
from bench.report.service import WORDS_ONLY
from bench.synthetic import SyntheticStore, fresh_memories, generate_store
from bench.timing import RunPlan, measure, summarise
from bench.token_lookup import timed_lookups
from mcp_bridge import handlers
from memories import services
from memories.conf import embedder, ranking_profile
from memories.models import Memory, MemoryTag, MemoryToken, RecallEntry
from memories.recall import memory_text, parse_query
from memories.vocabulary import CATEGORY_ORDER

RECALL_BY_IDS = 5


@dataclass(frozen=True)
class Operation:
    name: str
    group: str  # reflect, recall, write, status, migrate, auth
    call: Callable[[int], object]
    band: str | None = None
    query_words: int | None = None
    # How many memories the operation has to score (recall only), averaged over its inputs.
    candidates: float | None = None


def resident_megabytes() -> float:
    """This process's resident memory now: a worker's, with the model loaded and the
    owner's vectors cached by the recalls just measured."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def find_migrate() -> Callable[..., Any] | None:
    """`memories.services.migrate` once it exists (it is built in parallel with this)."""
    candidate = getattr(services, "migrate", None)
    return candidate if callable(candidate) else None


def prepare_store(size: int, seed: int, now: datetime) -> dict[str, Any]:
    """Write the store for `now` into an empty database (bulk path); facts about it."""
    store = generate_store(size=size, now=now, seed=seed)
    users = ensure_users([store.owner, *store.others])
    started = time.perf_counter()
    load_bulk(store.memories, users)
    loaded_s = time.perf_counter() - started
    analyze()
    checkpoint()
    return {
        "anchor": store.now.isoformat(),
        "memories_for_user": size,
        "memories_in_database": Memory.objects.count(),
        "token_rows": MemoryToken.objects.count(),
        "tag_rows": MemoryTag.objects.count(),
        "core_for_user": sum(m.core for m in store.of(store.owner)),
        "load_seconds": round(loaded_s, 1),
        "fingerprint": store.fingerprint(),
    }


def move_to_now(anchor: datetime, now: datetime) -> None:
    """Shift every timestamp of a store prepared at `anchor` so it looks prepared `now`:
    the same rows a fresh load at `now` would write."""
    delta = now - anchor
    Memory.objects.update(
        created_at=F("created_at") + delta,
        updated_at=F("updated_at") + delta,
        last_touched_at=F("last_touched_at") + delta,
    )
    Memory.objects.filter(last_retrieved__isnull=False).update(
        last_retrieved=F("last_retrieved") + delta
    )
    shift = delta // timedelta(microseconds=1)
    RecallEntry.objects.update(
        created_us=F("created_us") + shift, updated_us=F("updated_us") + shift
    )
    RecallEntry.objects.filter(last_retrieved_us__isnull=False).update(
        last_retrieved_us=F("last_retrieved_us") + shift
    )


def _candidates(owner: Any, *, query: str | None = None, category: str | None = None) -> int:
    """How many live memories a recall has to score: those sharing a word with the query,
    or those of the category."""
    if query is not None:
        keys = parse_query(query, ranking_profile()).tokens
        tokens = MemoryToken.objects.filter(owner=owner, key__in=keys)
        return tokens.values("entry_id").distinct().count()
    return RecallEntry.objects.filter(owner=owner, category=category).count()


def operations(
    store: SyntheticStore, owner: Any, pools: QueryPools, *, seed: int
) -> list[Operation]:
    now = datetime.now(UTC)
    own_ids = [str(m.id) for m in store.of(store.owner)]
    rng = random.Random(f"taproot-bench-ops-{seed}")
    id_sets = [rng.sample(own_ids, RECALL_BY_IDS) for _ in range(100)]
    to_update = rng.sample(own_ids, min(len(own_ids), 400))
    new_memories = list(fresh_memories(seed=seed, now=now, count=700, stream="create"))
    new_contents = list(fresh_memories(seed=seed, now=now, count=400, stream="update"))
    categories = list(CATEGORY_ORDER)

    ops = [
        Operation("reflect", "reflect", lambda i: services.reflect(owner=owner)),
        Operation("status", "status", lambda i: handlers.status(owner=owner)),
    ]

    def recall_query(band: str, size: int) -> Callable[[int], object]:
        return lambda i: handlers.recall(owner=owner, query=pools.pick(band, size, i))

    def by_words_alone(call: Callable[[int], object]) -> Callable[[int], object]:
        """The same call with recall by meaning off (TAPROOT_EMBEDDER=none)."""

        def call_without_meaning(i: int) -> object:
            with override_settings(TAPROOT_EMBEDDER="none"):
                return call(i)

        return call_without_meaning

    for band in BANDS:
        for size in QUERY_SIZES:
            pool = pools.queries[band][size]
            if not pool:
                continue
            sample = pool[:10]
            candidates = sum(_candidates(owner, query=q) for q in sample) / len(sample)
            name = f"recall, {size}-word query, {band} words"
            ops.append(
                Operation(
                    name,
                    "recall",
                    recall_query(band, size),
                    band=band,
                    query_words=size,
                    candidates=candidates,
                )
            )
            if embedder() is not None:
                ops.append(
                    Operation(
                        f"{name}{WORDS_ONLY}",
                        "recall",
                        by_words_alone(recall_query(band, size)),
                        band=band,
                        query_words=size,
                        candidates=candidates,
                    )
                )
    ops.append(
        Operation(
            f"recall by ids ({RECALL_BY_IDS})",
            "recall",
            lambda i: handlers.recall(owner=owner, ids=id_sets[i % len(id_sets)]),
            candidates=float(RECALL_BY_IDS),
        )
    )
    ops.append(
        Operation(
            "recall by category",
            "recall",
            lambda i: handlers.recall(owner=owner, category=categories[i % len(categories)]),
            candidates=sum(_candidates(owner, category=c) for c in categories) / len(categories),
        )
    )

    def create(i: int) -> object:
        memory = new_memories[i % len(new_memories)]
        return handlers.remember(
            owner=owner,
            category=memory.category,
            content=memory.content,
            gist=memory.gist,
            salience=memory.salience,
            tags=list(memory.tags),
            search_keywords=list(memory.search_keywords),
        )

    def update(i: int) -> object:
        memory = new_contents[i % len(new_contents)]
        return handlers.remember(
            owner=owner,
            update_id=to_update[i % len(to_update)],
            category=memory.category,
            content=memory.content,
        )

    ops.append(Operation("remember, create", "write", create))
    semantic = embedder()
    if semantic is not None:
        texts = [
            memory_text(gist=m.gist, content=m.content, tags=m.tags, keywords=m.search_keywords)
            for m in new_memories
        ]
        ops.append(
            Operation(
                "embedding one memory",
                "write",
                lambda i: semantic.embed([texts[i % len(texts)]]),
            )
        )
    ops.append(Operation("remember, update", "write", update))
    written_out, through_the_orm = timed_lookups(owner)
    ops.append(Operation("bearer-token lookup, written out", "auth", written_out))
    ops.append(Operation("bearer-token lookup, ORM", "auth", through_the_orm))
    migrate = find_migrate()
    if migrate is not None:
        migrate(owner=owner)  # the store is canonical already; make sure of it once
        ops.append(
            Operation("migrate, already migrated", "migrate", lambda i: migrate(owner=owner))
        )
    return ops


def count_queries(operation: Operation, run: int) -> int:
    with CaptureQueriesContext(connection) as captured:
        operation.call(run)
    return len(captured.captured_queries)


def reflect_payload_size(owner: Any) -> dict[str, Any]:
    """The payload reflect sends now: its size against the budget, and what it carries."""
    payload = services.reflect(owner=owner)
    lines = payload.payload["catalog_count"]
    return {
        "bytes": payload.bytes,
        "kb": payload.kilobytes,
        "tokens": payload.tokens,
        "max_tokens": payload.max_tokens,
        "core_count": payload.payload["core_count"],
        "core_in_full": len(payload.core_full),
        "core_as_lines": len(payload.core_lines),
        "core_omitted": payload.core_omitted,
        "catalog_lines": lines,
        "catalog_lines_per_1000_tokens": round(1000 * lines / payload.tokens, 2),
        "catalog_cut_by_budget": payload.cut_count,
        "over_budget": payload.tokens > payload.max_tokens,
    }


def profile(operation: Operation, first_run: int, runs: int = 20) -> str:
    """The top of a CPU profile (process time, so other load on the machine matters less)."""
    profiler = cProfile.Profile(time.process_time)
    profiler.enable()
    for run in range(first_run, first_run + runs):
        operation.call(run)
    profiler.disable()
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.sort_stats("cumulative").print_stats(30)
    return f"{runs} runs of {operation.name}\n" + out.getvalue()


def run(
    *,
    size: int,
    seed: int,
    plan: RunPlan,
    anchor: datetime,
    only: str | None = None,
    profile_names: str | None = None,
) -> dict[str, Any]:
    """Measure on a database prepared by `prepare_store` at `anchor`.

    `profile_names`: also profile the operations whose name contains it.
    """
    now = datetime.now(UTC).replace(microsecond=0)
    move_to_now(anchor, now)
    analyze()
    store = generate_store(size=size, now=anchor, seed=seed)
    owner = ensure_users([store.owner])[store.owner]
    facts: dict[str, Any] = {"fingerprint": store.fingerprint()}
    pools = query_pools(store.of(store.owner), seed=seed)
    facts["band_words"] = {band: len(words) for band, words in pools.band_words.items()}
    # Measured on the store as prepared, before the writes below add to it, so the figure
    # does not depend on which operations ran (or for how long).
    payload = reflect_payload_size(owner)
    results = []
    profiles: dict[str, str] = {}
    for operation in operations(store, owner, pools, seed=seed):
        if only and not any(part.strip() in operation.name for part in only.split(",")):
            continue
        gc.collect()
        samples = measure(operation.call, plan)
        queries = count_queries(operation, len(samples) + plan.warmup)
        if profile_names and profile_names in operation.name:
            profiles[operation.name] = profile(operation, len(samples) + plan.warmup + 1)
        results.append(
            {
                "operation": operation.name,
                "group": operation.group,
                "band": operation.band,
                "query_words": operation.query_words,
                "candidates": None
                if operation.candidates is None
                else round(operation.candidates, 1),
                "sql_queries": queries,
                **summarise(samples).as_dict(),
            }
        )
    migrate_available = find_migrate() is not None
    facts["worker_rss_mb"] = resident_megabytes()
    semantic = embedder()
    facts["embedder"] = semantic.name if semantic is not None else None
    return {
        "size": size,
        "seed": seed,
        "store": facts,
        "reflect_payload": payload,
        "migrate_available": migrate_available,
        "operations": results,
        "profiles": profiles,
    }
