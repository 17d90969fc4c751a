"""Recall on a store grown from empty while the server runs, before and after a restart.

A server starts on an empty SQLite store (migrate analyses it, as scripts/serve does) and
the store grows to `--size` memories through taproot_remember, in this process, on a
connection kept from call to call as /mcp keeps it (mcp_bridge.database). Then recall by 5
ids and 1-word recall are timed on that connection (what a running server does), and
again after a restart (a new connection, analysed at start).
`--no-growth-analysis` turns off the re-analysis as the store grows (the behaviour before
issue 32): run both, interleaved, to compare.

    .venv/bin/python -m bench.growth_statistics --size 10000 [--no-growth-analysis]
"""

import argparse
import json
import random
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from bench.database import setup_django, sqlite_database
from bench.synthetic import OWNER, generate_store
from bench.timing import summarise


def _time(call: Callable[[int], object], runs: int) -> float:
    for i in range(5):
        call(i)
    samples = []
    for i in range(runs):
        started = time.perf_counter()
        call(i)
        samples.append((time.perf_counter() - started) * 1000)
    return round(summarise(samples).median_ms, 2)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.growth_statistics", description=__doc__)
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--no-growth-analysis", action="store_true")
    args = parser.parse_args()

    folder = Path(tempfile.mkdtemp(prefix="taproot-growth-"))
    setup_django(sqlite_database(folder, "grown").url)

    from django.contrib.auth import get_user_model
    from django.db import connection

    from mcp_bridge import handlers
    from mcp_bridge.database import in_database_thread
    from memories import maintenance
    from memories.models import Memory

    if args.no_growth_analysis:
        maintenance.FIRST_GROWTH_ANALYSIS = 1 << 62
    store = generate_store(size=args.size, now=datetime.now(UTC), seed=7, other_users=0)
    owner = get_user_model().objects.create_user(username=OWNER)
    started = time.perf_counter()
    for memory in store.of(OWNER):
        in_database_thread(
            handlers.remember,
            owner=owner,
            category=memory.category,
            gist=memory.gist,
            content=memory.content,
            tags=list(memory.tags),
            salience=memory.salience,
        )
    grown_s = time.perf_counter() - started
    maintenance.wait_for_background_analysis(timeout=120)

    ids = list(Memory.objects.filter(owner=owner).values_list("id", flat=True))
    rng = random.Random(7)
    id_sets = [[str(i) for i in rng.sample(ids, 5)] for _ in range(50)]
    words = [m.gist.split()[0] for m in store.of(OWNER)[:50]]

    def by_ids(i: int) -> object:
        return in_database_thread(handlers.recall, owner=owner, ids=id_sets[i % len(id_sets)])

    def one_word(i: int) -> object:
        return in_database_thread(handlers.recall, owner=owner, query=words[i % len(words)])

    figures: dict[str, object] = {
        "size": args.size,
        "growth_analysis": not args.no_growth_analysis,
        "grown_seconds": round(grown_s, 1),
        "running": {
            "by_ids_ms": _time(by_ids, args.runs),
            "one_word_ms": _time(one_word, args.runs),
        },
    }
    connection.close()
    maintenance.refresh_planner_statistics()  # what a restart does (migrate analyses)
    figures["after_restart"] = {
        "by_ids_ms": _time(by_ids, args.runs),
        "one_word_ms": _time(one_word, args.runs),
    }
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
