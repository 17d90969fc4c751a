"""Where the time of one call goes: the median of each step of a /mcp request in one
worker (bench.timeline_app), for recall by 5 ids on a 1,000-memory SQLite store.

A sampling profiler slows the worker too much to read latencies from; this notes
`perf_counter` at each step instead. The worker serves this checkout or, with
`--before PATH`, another (it runs `taproot_call_timeline`, a copy of
bench/timeline_app.py, from a temporary folder), each for `--seconds` of calls one after
the other from one kept-alive client; it prints the medians of each, in milliseconds, as
JSON, with the load average.

    .venv/bin/python -m bench.call_timeline [--before PATH] [--seconds 12]
"""

import argparse
import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.database import bench_environment, checkpoint, setup_django, sqlite_database
from bench.fixed_cost import recall_store, server
from bench.serving import ROOT, free_port, public_url

HERE = Path(__file__).resolve().parent


def timeline(
    root: Path, env: dict[str, str], token: str, id_sets: list[list[str]], seconds: float
) -> dict[str, Any]:
    import httpx2

    with tempfile.TemporaryDirectory(prefix="taproot-timeline-") as folder:
        shutil.copyfile(HERE / "timeline_app.py", Path(folder) / "taproot_call_timeline.py")
        out = Path(folder) / "timeline.json"
        own_env = {**env, "PYTHONPATH": folder, "TAPROOT_TIMELINE_OUT": str(out)}
        # Every server answers as the one public URL the token was issued for.
        port = free_port()
        app = "taproot_call_timeline:application"
        headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
        with server(root, own_env, app, port) as (url, _), httpx2.Client(timeout=30) as client:
            started, n = time.monotonic(), 0
            while time.monotonic() - started < seconds:
                body = {
                    "jsonrpc": "2.0",
                    "id": 2,
                    "method": "tools/call",
                    "params": {"name": "taproot_recall", "arguments": {"ids": id_sets[n % 100]}},
                }
                response = client.post(f"{url}/mcp", json=body, headers=headers)
                if response.status_code != 200 or response.json()["result"].get("isError"):
                    raise RuntimeError(f"{response.status_code} {response.text[:300]}")
                n += 1
        if not out.exists():
            raise RuntimeError(f"too few calls in {seconds} s for a timeline ({n})")
        found: dict[str, Any] = json.loads(out.read_text())
        return found


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.call_timeline", description=__doc__)
    parser.add_argument("--before", type=Path, help="another checkout to measure first")
    parser.add_argument("--seconds", type=float, default=12)
    args = parser.parse_args()

    database = sqlite_database(Path(tempfile.mkdtemp(prefix="taproot-timeline-")), "store")
    os.environ["TAPROOT_PUBLIC_URL"] = public_url(free_port())
    setup_django(database.url)

    token, id_sets = recall_store()
    checkpoint()
    env = {**os.environ, **bench_environment(database.url), "PYTHONUNBUFFERED": "1"}
    roots = {"after": ROOT} if args.before is None else {"before": args.before, "after": ROOT}
    figures: dict[str, Any] = {"load_before": [round(x, 2) for x in os.getloadavg()]}
    for name, root in roots.items():
        figures[name] = timeline(root.resolve(), env, token, id_sets, args.seconds)
    figures["load_after"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
