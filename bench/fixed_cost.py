"""The fixed cost of a call: recall by 5 ids over HTTP against the floor (bench.floor_app,
a bare bearer-checking ASGI endpoint under the same uvicorn), measured in one run.

A 1,000-memory SQLite store is prepared as the service bench prepares it; one uvicorn
worker serves it from this checkout and, with `--before PATH`, a second from another
checkout (e.g. `git archive <commit> | tar -x -C PATH`) on the same database; rounds
of `--calls` calls go to each in turn (interleaved), over one kept-alive HTTP client
posting the JSON-RPC request as Claude's clients do (no MCP client library: the same
client for the floor and for Taproot).

    .venv/bin/python -m bench.fixed_cost [--before PATH] [--rounds 8] [--calls 100]
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

from bench.database import bench_environment, setup_django, sqlite_database
from bench.serving import ROOT, free_port, public_url, wait_until_healthy
from bench.timing import percentile

RECALL_BY_IDS = 5


@contextmanager
def server(root: Path, env: dict[str, str], app: str, port: int) -> Iterator[str]:
    with tempfile.NamedTemporaryFile("w+b", prefix="taproot-fixed-cost-", suffix=".log") as log:
        command = [sys.executable, "-m", "taproot_site.server", app, "--host", "127.0.0.1"]
        command += ["--port", str(port), "--workers", "1", "--log-level", "warning"]
        command += ["--no-access-log"]
        process = subprocess.Popen(command, cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            url = f"http://127.0.0.1:{port}"
            wait_until_healthy(url, process, Path(log.name))
            yield url
        finally:
            process.terminate()
            process.wait(timeout=15)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.fixed_cost", description=__doc__)
    parser.add_argument("--before", type=Path, help="another checkout to measure beside")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--calls", type=int, default=100)
    args = parser.parse_args()

    folder = Path(tempfile.mkdtemp(prefix="taproot-fixed-cost-"))
    database = sqlite_database(folder, "store")
    port = free_port()
    os.environ["TAPROOT_PUBLIC_URL"] = public_url(port)
    setup_django(database.url)

    import httpx2

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
    id_sets = [rng.sample(ids, RECALL_BY_IDS) for _ in range(100)]

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
    samples: dict[str, list[float]] = {name: [] for name in targets}
    with ExitStack() as stack, httpx2.Client(timeout=30) as client:
        urls = {}
        for n, (name, root) in enumerate(targets.items()):
            app = "bench.floor_app:app" if name == "floor" else "taproot_site.asgi:application"
            own_port = port if n == 0 else free_port()
            urls[name] = stack.enter_context(server(root, env, app, own_port))
        time.sleep(2)
        headers = {
            "Authorization": f"Bearer {token}",
            "Accept": "application/json, text/event-stream",
        }
        for round_ in range(args.rounds):
            for name, url in urls.items():
                for i in range(args.calls + (5 if round_ == 0 else 0)):
                    body = {
                        "jsonrpc": "2.0",
                        "id": 2,
                        "method": "tools/call",
                        "params": {
                            "name": "taproot_recall",
                            "arguments": {"ids": id_sets[i % len(id_sets)]},
                        },
                    }
                    started = time.perf_counter()
                    response = client.post(f"{url}/mcp", json=body, headers=headers)
                    elapsed = (time.perf_counter() - started) * 1000
                    if response.status_code != 200 or "error" in response.json():
                        raise RuntimeError(f"{name}: {response.status_code} {response.text[:300]}")
                    if round_ or i >= 5:
                        samples[name].append(elapsed)
    floor = percentile(samples["floor"], 0.5)
    figures = {
        name: {
            "median_ms": round(percentile(values, 0.5), 3),
            "p95_ms": round(percentile(values, 0.95), 3),
            "times_floor": round(percentile(values, 0.5) / floor, 2),
            "calls": len(values),
        }
        for name, values in samples.items()
    }
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
