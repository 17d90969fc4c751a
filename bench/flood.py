"""The flood alone, against one server (issue 30, L-1): another account's recall, 60
times one after the other, alone and while one account floods /mcp with long remembers
(bench/http_bench.py's `flood`), `--runs` times against the same server.

The database must hold a prepared store first, e.g.:

    .venv/bin/python -m bench.child prepare --size 1000 --database-url URL --out /tmp/p.json
    .venv/bin/python -m bench.flood --database-url URL --workers 1 --runs 3
"""

import argparse
import asyncio
import json
import os
import statistics
import sys

from bench.database import setup_django


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.flood", description=__doc__)
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--size", type=int, default=1000, help="the prepared store's size")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)

    from bench.serving import free_port, public_url

    port = free_port()
    os.environ["TAPROOT_BENCH_PORT"] = str(port)
    os.environ["TAPROOT_PUBLIC_URL"] = public_url(port)
    setup_django(args.database_url)
    from django.db import connection

    from bench.http_bench import FLOOD_NEIGHBOUR, Workload, flood
    from bench.serving import issue_token, uvicorn_server

    backend = connection.vendor
    workload = Workload(args.size, args.seed)
    token = issue_token(workload.owner)
    flood_token = issue_token(FLOOD_NEIGHBOUR)
    connection.close()
    rows = []
    with uvicorn_server(args.database_url, port, args.workers) as url:
        for _ in range(args.runs):
            row = asyncio.run(flood(url, token, flood_token, workload))
            row = {"backend": backend, "workers": args.workers, **row}
            print(json.dumps(row), flush=True)
            rows.append(row)
    ratios = [r["ratio"] for r in rows]
    print(f"median ratio of {len(rows)} runs: {statistics.median(ratios):.2f}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
