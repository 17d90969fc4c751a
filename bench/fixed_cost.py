"""The fixed cost of a call: a tool call over HTTP against the floor (bench.floor_app, a
bare bearer-checking ASGI endpoint under the same uvicorn), measured in one run.

A 1,000-memory store is prepared as the service bench prepares it, on SQLite (a file in
a temporary folder) or PostgreSQL (`--backend postgres`: the database `<name>_fixed_cost`
of `--postgres-url`, made afresh); one uvicorn worker serves it from this checkout and,
with `--before PATH`, a second from another checkout (e.g. `git archive <commit> | tar -x
-C PATH`), each on a copy of the store; rounds of `--calls` calls go to each in turn
(interleaved), over one kept-alive HTTP client posting the JSON-RPC request as Claude's
clients do (no MCP client library: the same client for the floor and for Taproot).
Besides the latency, each server's CPU time (all its threads, from /proc) over the
rounds after the first, per call: on a busy machine the latency mostly measures the wait
for a core, the CPU time what the call costs.
The call is recall by 5 ids (`--tool recall`) or a remember of a new memory of a few
words (`--tool remember`). The load average is printed before and after.

    .venv/bin/python -m bench.fixed_cost [--before PATH] [--rounds 8] [--calls 100]
        [--backend sqlite|postgres] [--postgres-url URL] [--tool recall|remember]
"""

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from datetime import UTC, datetime
from pathlib import Path

from bench.database import (
    DEFAULT_POSTGRES_URL,
    BenchDatabase,
    bench_environment,
    checkpoint,
    copy_database,
    postgres_database,
    recreate,
    setup_django,
    sqlite_database,
)
from bench.serving import ROOT, free_port, public_url, wait_until_healthy
from bench.timing import percentile

RECALL_BY_IDS = 5


def recall_store() -> tuple[str, list[list[str]]]:
    """The bench's store of 1,000 memories prepared in the database Django is set up on, a
    token of its owner's, and 100 sets of RECALL_BY_IDS of its ids to recall by."""
    from bench.service_bench import prepare_store
    from bench.serving import issue_token
    from bench.synthetic import OWNER
    from memories.models import Memory

    prepare_store(1000, 7, datetime.now(UTC))
    token = issue_token(OWNER)
    ids = [
        str(i) for i in Memory.objects.filter(owner__username=OWNER).values_list("id", flat=True)
    ]
    rng = random.Random(7)
    return token, [rng.sample(ids, RECALL_BY_IDS) for _ in range(100)]


@contextmanager
def server(root: Path, env: dict[str, str], app: str, port: int) -> Iterator[tuple[str, int]]:
    """The server's URL and process id, while it runs."""
    with tempfile.NamedTemporaryFile("w+b", prefix="taproot-fixed-cost-", suffix=".log") as log:
        command = [sys.executable, "-m", "taproot_site.server", app, "--host", "127.0.0.1"]
        command += ["--port", str(port), "--workers", "1", "--log-level", "warning"]
        command += ["--no-access-log"]
        process = subprocess.Popen(command, cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            url = f"http://127.0.0.1:{port}"
            wait_until_healthy(url, process, Path(log.name))
            yield url, process.pid
        finally:
            process.terminate()
            process.wait(timeout=15)


def cpu_seconds(pid: int) -> float:
    """The CPU time (user and system, all threads) the process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _copies(database: BenchDatabase, names: list[str]) -> dict[str, BenchDatabase]:
    """A copy of the store for each name, with this process's connections closed."""
    from django.db import connections

    checkpoint()  # the token too in SQLite's file, which the copies are made of
    connections.close_all()  # nor is a PostgreSQL database copied while we hold it
    for held in connections.all():
        if getattr(held, "pool", None) is not None:
            held.close_pool()  # type: ignore[attr-defined]  # PostgreSQL's only
    copies = {}
    for name in names:
        if database.backend == "sqlite":
            path = Path(database.url[len("sqlite:///") :])
            copies[name] = sqlite_database(path.parent, f"{path.stem}_{name}")
        else:
            copies[name] = BenchDatabase("postgres", f"{database.url}_{name}")
        copy_database(database, copies[name])
    return copies


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.fixed_cost", description=__doc__)
    parser.add_argument("--before", type=Path, help="another checkout to measure beside")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--backend", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--postgres-url", default=DEFAULT_POSTGRES_URL)
    parser.add_argument("--tool", choices=["recall", "remember"], default="recall")
    args = parser.parse_args()

    database: BenchDatabase
    if args.backend == "postgres":
        database = postgres_database(args.postgres_url, "fixed_cost")
        recreate(database)
    else:
        database = sqlite_database(Path(tempfile.mkdtemp(prefix="taproot-fixed-cost-")), "store")
    load_before = os.getloadavg()
    port = free_port()
    os.environ["TAPROOT_PUBLIC_URL"] = public_url(port)
    setup_django(database.url)

    import httpx2

    token, id_sets = recall_store()
    rng = random.Random(7)
    words = ["harbour", "violin", "lantern", "orchard", "glacier", "compass", "meadow"]

    def arguments(n: int) -> dict[str, object]:
        if args.tool == "recall":
            return {"ids": id_sets[n % len(id_sets)]}
        # A new memory each call (the service refuses an exact repeat).
        picked = " ".join(rng.choice(words) for _ in range(4))
        return {"category": "episodic", "content": f"Call {n}: the {picked}.", "gist": picked}

    # Every server answers as the same public URL, so one token serves them all.
    env = {
        **os.environ,
        **bench_environment(database.url),
        "TAPROOT_PUBLIC_URL": public_url(port),
        "TAPROOT_FLOOR_TOKEN": token,
        "PYTHONUNBUFFERED": "1",
    }
    targets = {"floor": ROOT, "after": ROOT}
    if args.before is not None:
        targets["before"] = args.before.resolve()
    # Each Taproot server has a copy of the store of its own: both write (a recall records
    # its use, the clients page its calls), and on one SQLite file the writes of one
    # would wait for the other's (a wait that costs no CPU and lands on either).
    copies = _copies(database, [name for name in targets if name != "floor"])
    samples: dict[str, list[float]] = {name: [] for name in targets}
    # The servers' CPU time over the measured calls: unlike the latency, barely moved by
    # what else the machine runs.
    cpu = dict.fromkeys(targets, 0.0)
    pids = {}
    with ExitStack() as stack, httpx2.Client(timeout=30) as client:
        urls = {}
        for n, (name, root) in enumerate(targets.items()):
            app = "bench.floor_app:app" if name == "floor" else "taproot_site.asgi:application"
            own_port = port if n == 0 else free_port()
            own_env = env if name == "floor" else {**env, "DATABASE_URL": copies[name].url}
            urls[name], pids[name] = stack.enter_context(server(root, own_env, app, own_port))
        time.sleep(2)
        headers = {
            "Authorization": f"Bearer {token}",
            "Accept": "application/json, text/event-stream",
        }
        sent = 0
        for round_ in range(args.rounds):
            for name, url in urls.items():
                if round_:
                    cpu[name] -= cpu_seconds(pids[name])
                for i in range(args.calls + (5 if round_ == 0 else 0)):
                    sent += 1
                    body = {
                        "jsonrpc": "2.0",
                        "id": 2,
                        "method": "tools/call",
                        "params": {"name": f"taproot_{args.tool}", "arguments": arguments(sent)},
                    }
                    started = time.perf_counter()
                    response = client.post(f"{url}/mcp", json=body, headers=headers)
                    elapsed = (time.perf_counter() - started) * 1000
                    answer = response.json()
                    if response.status_code != 200 or "error" in answer:
                        raise RuntimeError(f"{name}: {response.status_code} {response.text[:300]}")
                    if name != "floor" and answer["result"].get("isError"):
                        raise RuntimeError(f"{name}: {response.text[:300]}")
                    if round_ or i >= 5:
                        samples[name].append(elapsed)
                if round_:
                    cpu[name] += cpu_seconds(pids[name])
    floor = percentile(samples["floor"], 0.5)
    figures: dict[str, dict[str, object]] = {
        name: {
            "median_ms": round(percentile(values, 0.5), 3),
            "p95_ms": round(percentile(values, 0.95), 3),
            "times_floor": round(percentile(values, 0.5) / floor, 2),
            "calls": len(values),
            "cpu_ms_per_call": round(cpu[name] * 1000 / (args.calls * max(args.rounds - 1, 1)), 3),
            "times_floor_cpu": round(cpu[name] / cpu["floor"], 2) if cpu["floor"] else None,
        }
        for name, values in samples.items()
    }
    figures["run"] = {
        "backend": args.backend,
        "tool": args.tool,
        "load_before": [round(x, 2) for x in load_before],
        "load_after": [round(x, 2) for x in os.getloadavg()],
    }
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
