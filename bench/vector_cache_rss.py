"""A worker's memory under the vector cache's budget (issue 32, item 7): one process, a
thread pool like a worker's, each call a random owner's vectors brought into one
VectorCache (memories.recall) and scanned, as a worded recall does; the RSS
against the bytes the cache accounts for, every 500 calls.

    .venv/bin/python -m bench.vector_cache_rss --database-url URL [--owners 300]
        [--calls 2500] [--threads 8] [--budget-mb 256]

The owners are the many-users bench's (bench.many_users --load-only), read from the
database as a worker reads them, on a connection of each call's own. Prints JSON lines.
"""

import argparse
import json
import os
import random
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from bench.database import setup_django
from bench.many_users import PREFIX, rss_mb


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.vector_cache_rss", description=__doc__)
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--owners", type=int, default=300)
    parser.add_argument("--calls", type=int, default=2500)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--budget-mb", type=int, default=256)
    args = parser.parse_args(argv)
    setup_django(args.database_url, migrate=False)
    from django.contrib.auth import get_user_model
    from django.db import connection

    from memories.conf import embedder
    from memories.recall import VectorCache, statistics

    semantic = embedder()
    if semantic is None:
        parser.error("recall uses no embedder here (TAPROOT_EMBEDDER)")
    owners = list(
        get_user_model()
        .objects.filter(username__startswith=PREFIX)
        .order_by("username")
        .values_list("pk", flat=True)[: args.owners]
    )
    cache = VectorCache(budget=args.budget_mb * 1024 * 1024)
    query = semantic.embed_query("holiday plans with the family")
    assert query is not None
    rng = random.Random(7)
    base = rss_mb(os.getpid())

    def one(_: int) -> None:
        owner_id = rng.choice(owners)
        try:
            cache.ceiling(owner_id, query, embedder=semantic, index=statistics(owner_id, []))
        finally:
            connection.close()

    started = time.perf_counter()
    with ThreadPoolExecutor(args.threads) as pool:
        for done in range(500, args.calls + 1, 500):
            list(pool.map(one, range(500)))
            row = {
                "calls": done,
                "owners": len(owners),
                "threads": args.threads,
                "budget_mb": args.budget_mb,
                "base_rss_mb": base,
                "rss_mb": rss_mb(os.getpid()),
                "held_mb": round(cache.held_bytes() / 2**20, 1),
                "seconds": round(time.perf_counter() - started, 1),
                "load_average": round(os.getloadavg()[0], 2),
            }
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
