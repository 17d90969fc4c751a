"""End to end over HTTP: the real MCP client against a real uvicorn server (both
started by bench.serving).

Runs on a database the service benchmark already filled (call after
`bench.database.setup_django`). A token comes from `manage.py issue_token`; the server
is uvicorn started as `scripts/serve` starts it (`python -m taproot_site.server`) with 1
or 2 workers, production settings (DEBUG off). The client speaks the 2025 handshake era,
as Claude.ai does today.
"""

import asyncio
import multiprocessing
import os
import random
import time
from contextlib import AsyncExitStack
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench import profiling
from bench.queries import query_pools
from bench.serving import CLIENT_MODE, ROOT, issue_token, open_client, uvicorn_server
from bench.synthetic import fresh_memories, generate_store
from bench.timing import RunPlan, summarise

WORKERS = (1, 2)
CLIENTS = (1, 4, 16)


def unavailable_reason() -> str | None:
    """Why the HTTP benchmark cannot run in this checkout, or None."""
    needed = [
        ROOT / "mcp_bridge" / "server.py",
        ROOT / "oauth" / "management" / "commands" / "issue_token.py",
    ]
    missing = [str(p.relative_to(ROOT)) for p in needed if not p.exists()]
    if missing:
        return "the /mcp endpoint is not built yet (missing " + ", ".join(missing) + ")"
    return None


Call = tuple[str, dict[str, Any]]
# Common-word recalls timed again once the worker has served every query of their pool.
SERVED = "recall, {size}-word query, common words, each served before"
SERVED_SIZES = (3, 6)


class Workload:
    """The tool calls to time, named like the service operations they wrap."""

    def __init__(self, size: int, seed: int) -> None:
        store = generate_store(size=size, now=datetime.now(UTC), seed=seed)
        mine = store.of(store.owner)
        self.owner = store.owner
        self.pools = query_pools(mine, seed=seed)
        rng = random.Random(f"taproot-bench-http-{seed}")
        ids = [str(m.id) for m in mine]
        self.id_sets = [rng.sample(ids, 5) for _ in range(100)]
        self.fresh = list(
            fresh_memories(seed=seed, now=datetime.now(UTC), count=3000, stream="http")
        )
        self.created = 0

    def remember(self) -> Call:
        memory = self.fresh[self.created % len(self.fresh)]
        self.created += 1
        return (
            "taproot_remember",
            {
                "category": memory.category,
                "content": memory.content,
                "gist": memory.gist,
                "salience": memory.salience,
                "tags": list(memory.tags),
                # As the in-process "remember, create" sends it, so the two compare.
                "search_keywords": list(memory.search_keywords),
            },
        )

    def tool_calls(self) -> dict[str, Any]:
        """Operation name → function of the run number giving a call."""
        calls: dict[str, Any] = {
            "reflect": lambda i: ("taproot_reflect", {}),
            "status": lambda i: ("taproot_status", {}),
        }
        # Three words of each band, and the other sizes issue 32's targets name for common
        # words (named as the in-process operations are, so the two compare).
        queries = [(3, band) for band in ("rare", "middle", "common")] + [
            (1, "common"),
            (6, "common"),
        ]
        for size, band in queries:
            calls[f"recall, {size}-word query, {band} words"] = lambda i, size=size, band=band: (
                "taproot_recall",
                {"query": self.pools.pick(band, size, i)},
            )
        # The same common-word queries once the worker has served each of them (warm-up:
        # the whole pool), as a worker that has served its owner a while finds them: the
        # words it holds (memories.recall.postings) it keeps through writes.
        for size in SERVED_SIZES:
            calls[SERVED.format(size=size)] = lambda i, size=size: (
                "taproot_recall",
                {"query": self.pools.pick("common", size, i)},
            )
        calls["recall by ids (5)"] = lambda i: (
            "taproot_recall",
            {"ids": self.id_sets[i % len(self.id_sets)]},
        )
        calls["remember, create"] = lambda i: self.remember()
        return calls

    def warmup(self, name: str, plan: RunPlan) -> int:
        """How many calls of this operation come before the timed ones."""
        for size in SERVED_SIZES:
            if name == SERVED.format(size=size):
                return len(self.pools.queries["common"][size]) + plan.warmup
        return plan.warmup

    def call_for(self, mix: str, i: int) -> Call:
        if mix == "recall":
            return ("taproot_recall", {"query": self.pools.pick("middle", 3, i)})
        return self.conversation(i)

    def conversation(self, i: int) -> Call:
        """A conversation's share of calls: mostly recall, some writes, one reflect in ten."""
        step = i % 10
        if step == 0:
            return ("taproot_reflect", {})
        if step in (1, 2):
            return self.remember()
        if step in (3, 4):
            return ("taproot_recall", {"ids": self.id_sets[i % len(self.id_sets)]})
        return ("taproot_recall", {"query": self.pools.pick("middle", 3, i)})


async def _call(client: Any, call: Call) -> bool:
    result = await client.call_tool(call[0], call[1])
    return not result.is_error


async def latency(url: str, token: str, workload: Workload, plan: RunPlan) -> list[dict[str, Any]]:
    rows = []
    async with AsyncExitStack() as stack:
        client = await open_client(stack, url, token)
        for name, make in workload.tool_calls().items():
            warmup = workload.warmup(name, plan)
            for run in range(warmup):
                await _call(client, make(run))
            samples: list[float] = []
            errors = 0
            spent = 0.0
            run = warmup
            client_cpu = time.process_time()
            while len(samples) < plan.max_runs:
                call = make(run)
                started = time.perf_counter()
                ok = await _call(client, call)
                elapsed = time.perf_counter() - started
                errors += not ok
                samples.append(elapsed * 1000)
                spent += elapsed
                run += 1
                if len(samples) >= plan.min_runs and spent >= plan.budget_s:
                    break
            # The MCP client shares this machine: what it spends per call is in the latency.
            client_ms = (time.process_time() - client_cpu) * 1000 / len(samples)
            rows.append(
                {
                    "tool": name,
                    "errors": errors,
                    "client_cpu_ms": round(client_ms, 3),
                    **summarise(samples).as_dict(),
                }
            )
    return rows


PROFILED = "recall by ids (5)"


async def _call_repeatedly(
    url: str, token: str, workload: Workload, name: str, seconds: float
) -> int:
    make = workload.tool_calls()[name]
    async with AsyncExitStack() as stack:
        client = await open_client(stack, url, token)
        for run in range(5):  # warm-up
            await _call(client, make(run))
        calls = 0
        stop_at = time.perf_counter() + seconds
        while time.perf_counter() < stop_at:
            await _call(client, make(calls))
            calls += 1
    return calls


def profile(
    database_url: str, port: int, token: str, workload: Workload, seconds: float, out: Path
) -> dict[str, Any]:
    """A sampling profile of one worker serving `PROFILED` calls back to back, summed into
    its largest costs (bench.profiling); the raw samples are kept in `out`."""
    if profiling.py_spy() is None:
        return {"operation": PROFILED, "unavailable": "py-spy is not installed"}
    with uvicorn_server(database_url, port, 1, under=profiling.record_command(out)) as url:
        calls = asyncio.run(_call_repeatedly(url, token, workload, PROFILED, seconds))
    if not out.exists():
        return {"operation": PROFILED, "unavailable": "py-spy wrote no profile (ptrace refused?)"}
    return {"operation": PROFILED, "calls": calls, "raw": str(out)} | profiling.summarise(
        out.read_text()
    )


# "conversation": the mix of Workload.conversation; "recall": only 3-word recalls of
# middle-band words, the cheapest common call, which shows what the transport allows.
MIXES = ("conversation", "recall")


async def throughput(
    url: str, tokens: list[str], workload: Workload, clients: int, seconds: float, mix: str
) -> dict[str, Any]:
    """`clients` sessions calling back to back for `seconds` (after a short warm-up), each
    with a token of its own, as each of a person's Claude connections has."""
    samples: list[float] = []
    errors = 0
    counter = 0
    measuring = False
    stop_at = 0.0

    async def one_client(client: Any) -> None:
        nonlocal counter, errors
        while True:
            counter += 1
            call = workload.call_for(mix, counter)
            started = time.perf_counter()
            try:
                ok = await _call(client, call)
            except Exception:
                ok = False
            finished = time.perf_counter()
            if measuring and finished <= stop_at:
                samples.append((finished - started) * 1000)
                errors += not ok
            if measuring and finished > stop_at:
                return

    async with AsyncExitStack() as stack:
        sessions = [await open_client(stack, url, tokens[n]) for n in range(clients)]
        tasks = [asyncio.create_task(one_client(s)) for s in sessions]
        await asyncio.sleep(1.0)  # warm-up: connections open, workers busy
        cpu_before = time.process_time()
        started = time.perf_counter()
        stop_at = started + seconds
        measuring = True
        await asyncio.gather(*tasks)
        elapsed = time.perf_counter() - started
        client_cpu = time.process_time() - cpu_before
    summary = summarise(samples) if samples else None
    return {
        "mix": mix,
        "clients": clients,
        "seconds": round(elapsed, 2),
        "calls": len(samples),
        "calls_per_second": round(len(samples) / seconds, 1),
        "errors": errors,
        "median_ms": summary.median_ms if summary else None,
        "p95_ms": summary.p95_ms if summary else None,
        "p99_ms": summary.p99_ms if summary else None,
        # The load generator shares the machine: how much of a core it used.
        "client_cpu_share": round(client_cpu / elapsed, 2),
    }


# A burst: the tool calls of one message sent at once, as Claude sends them, on the one
# token Claude.ai keeps for a person (issue 22: 28 calls, 22 of them refused before).
BURST_RECALLS = 20
BURST_WRITES = 8
BURSTS = 5


async def bursts(url: str, token: str, workload: Workload, count: int) -> dict[str, Any]:
    """`count` bursts of BURST_RECALLS recalls and BURST_WRITES remembers sent at once on
    one session, one burst after the other: how many calls failed (a refusal raises in the
    MCP client), how long each call and each whole burst took."""
    calls: list[float] = []
    whole: list[float] = []
    failed = 0

    async def one(client: Any, call: Call) -> None:
        nonlocal failed
        started = time.perf_counter()
        try:
            ok = await _call(client, call)
        except Exception:
            ok = False
        calls.append((time.perf_counter() - started) * 1000)
        failed += not ok

    async with AsyncExitStack() as stack:
        client = await open_client(stack, url, token)
        await _call(client, workload.call_for("recall", 0))  # warm-up
        for n in range(count):
            burst = [
                workload.call_for("recall", n * BURST_RECALLS + i) for i in range(BURST_RECALLS)
            ]
            burst += [workload.remember() for _ in range(BURST_WRITES)]
            started = time.perf_counter()
            await asyncio.gather(*(one(client, call) for call in burst))
            whole.append((time.perf_counter() - started) * 1000)
    per_call = summarise(calls)
    return {
        "bursts": count,
        "calls": len(calls),
        "failed": failed,
        "burst_median_ms": summarise(whole).median_ms,
        "burst_max_ms": round(max(whole), 1),
        "call_median_ms": per_call.median_ms,
        "call_max_ms": round(max(calls), 1),
    }


# The flood (issue 22): one account sends FLOOD_PARALLEL remembers at a time, each of
# FLOOD_CHARS emoji (the longest content a memory may have, in the characters that cost an
# embedder most), while another account recalls, one call after the other.
FLOOD_PARALLEL = 5
FLOOD_CHARS = 20_000
FLOOD_RECALLS = 60
FLOOD_NEIGHBOUR = "bench-neighbour-1"


def flood_remember(i: int) -> Call:
    emoji = "".join(chr(0x1F300 + (i * 7 + k) % 700) for k in range(FLOOD_CHARS))
    return (
        "taproot_remember",
        {"category": "episodic", "content": emoji, "gist": f"A flood of emoji, number {i}"},
    )


def _flood_process(url: str, token: str, stop: Any, counts: Any) -> None:
    """The flooding account, in a process of its own: its client's work (encoding and
    reading 5 bodies of 80 KB at a time) would otherwise delay the measured client's."""

    async def flood_calls() -> None:
        async with AsyncExitStack() as stack:
            client = await open_client(stack, url, token)
            sent = 0
            while not stop.is_set():
                calls = [flood_remember(sent + k) for k in range(FLOOD_PARALLEL)]
                done = await asyncio.gather(*(_call(client, call) for call in calls))
                sent += len(done)
                with counts.get_lock():
                    counts[0] += len(done)
                    counts[1] += done.count(False)

    asyncio.run(flood_calls())


async def flood(url: str, token: str, flood_token: str, workload: Workload) -> dict[str, Any]:
    """Another account's recall, alone and then during a flood of long remembers: its
    median and slowest call each way, and how many remembers the flood made meanwhile."""

    async def recalls(client: Any, offset: int) -> list[float]:
        samples = []
        for i in range(FLOOD_RECALLS):
            started = time.perf_counter()
            await _call(client, workload.call_for("recall", offset + i))
            samples.append((time.perf_counter() - started) * 1000)
        return samples

    spawn = multiprocessing.get_context("spawn")
    stop = spawn.Event()
    counts = spawn.Array("i", 2)  # remembers made, remembers failed
    async with AsyncExitStack() as stack:
        client = await open_client(stack, url, token)
        for i in range(10):  # warm-up
            await _call(client, workload.call_for("recall", i))
        alone = await recalls(client, 100)
        flooder = spawn.Process(target=_flood_process, args=(url, flood_token, stop, counts))
        flooder.start()
        try:
            while counts[0] < FLOOD_PARALLEL:  # the flood under way
                await asyncio.sleep(0.05)
                if not flooder.is_alive():
                    raise RuntimeError("the flooding process stopped before its first remembers")
            during = await recalls(client, 200)
        finally:
            stop.set()
            flooder.join(timeout=60)
    before, after = summarise(alone), summarise(during)
    return {
        "recalls": FLOOD_RECALLS,
        "alone_median_ms": before.median_ms,
        "alone_p95_ms": before.p95_ms,
        "alone_max_ms": round(max(alone), 1),
        "flood_median_ms": after.median_ms,
        "flood_p95_ms": after.p95_ms,
        "flood_max_ms": round(max(during), 1),
        "ratio": round(after.median_ms / before.median_ms, 2),
        "remembers": counts[0],
        "remembers_failed": counts[1],
    }


def run(
    *,
    database_url: str,
    size: int,
    seed: int,
    plan: RunPlan,
    seconds: float,
    profile_dir: Path | None = None,
) -> dict[str, Any]:
    """Latency per tool on one worker, a profile of one of them (into `profile_dir`), then
    throughput at each worker and client count.

    The process's TAPROOT_PUBLIC_URL must already name `port` (the token is bound to it).
    """
    from django.db import connection

    port = int(os.environ["TAPROOT_BENCH_PORT"])
    backend = connection.vendor
    workload = Workload(size, seed)
    tokens = [issue_token(workload.owner) for _ in range(max(CLIENTS))]
    token = tokens[0]
    flood_token = issue_token(FLOOD_NEIGHBOUR)
    connection.close()
    result: dict[str, Any] = {
        "client_mode": CLIENT_MODE,
        "latency": [],
        "throughput": [],
        "bursts": [],
    }
    for workers in WORKERS:
        with uvicorn_server(database_url, port, workers) as url:
            if workers == 1:
                for row in asyncio.run(latency(url, token, workload, plan)):
                    result["latency"].append({"backend": backend, **row})
            for mix in MIXES:
                for clients in CLIENTS:
                    row = asyncio.run(throughput(url, tokens, workload, clients, seconds, mix))
                    result["throughput"].append({"backend": backend, "workers": workers, **row})
            row = asyncio.run(bursts(url, token, workload, BURSTS))
            result["bursts"].append({"backend": backend, "workers": workers, **row})
            if workers == 1:
                row = asyncio.run(flood(url, token, flood_token, workload))
                result["flood"] = [{"backend": backend, "workers": workers, **row}]
    if profile_dir is not None:
        out = profile_dir / f"profile-http-{backend}-recall-by-ids.txt"
        found = profile(database_url, port, token, workload, max(plan.budget_s, 5.0), out)
        result["profile"] = {"backend": backend, **found}
    return result
