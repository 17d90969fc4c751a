"""One owner's large store under many clients (issue 32's throughput and RSS targets):
two workers, `--clients` callers each on a session of one of 16 tokens of the store's
owner, 3-word recalls of middle-band words (http_bench's "recall" mix) or, with `--band
common`, of common words (whose postings each worker holds: memories.recall.postings);
throughput, p50, p99 and each worker's RSS after each run, runs in the order given.

The database must hold a prepared store first (`bench/run --full --keep-databases`, or
`python -m bench.child prepare`):

    .venv/bin/python -m bench.one_owner --database-url URL --size 100000 [--clients 4 16 4]
        [--seconds 20] [--workers 2] [--band middle|common]
"""

import argparse
import asyncio
import json
import os
import sys

from bench.database import setup_django

SESSIONS = 16


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.one_owner", description=__doc__)
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--size", type=int, required=True, help="the prepared store's size")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--clients", type=int, nargs="+", default=[4, 16, 4])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--band", choices=["middle", "common"], default="middle")
    args = parser.parse_args(argv)

    from bench.serving import free_port, public_url

    port = free_port()
    os.environ["TAPROOT_PUBLIC_URL"] = public_url(port)
    setup_django(args.database_url, migrate=False)
    from django.db import connection

    from bench.http_bench import Workload
    from bench.many_users import throughput, worker_rss_mb
    from bench.serving import issue_token, uvicorn_server

    backend = connection.vendor
    workload = Workload(args.size, args.seed)
    tokens = {f"session-{n}": issue_token(workload.owner) for n in range(SESSIONS)}
    queries = [workload.pools.pick(args.band, 3, i) for i in range(60)]
    connection.close()
    with uvicorn_server(args.database_url, port, args.workers) as url:
        for clients in args.clients:
            row = asyncio.run(
                throughput(
                    url, tokens, queries, clients=clients, seconds=args.seconds, seed=args.seed
                )
            )
            row = {
                "backend": backend,
                "size": args.size,
                "workers": args.workers,
                **row,
                "worker_rss_mb": worker_rss_mb(port),
                "load_average": round(os.getloadavg()[0], 2),
            }
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
