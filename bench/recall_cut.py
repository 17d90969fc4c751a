"""Common-word recall on a prepared store, in process: what the recall cut (issue 32,
item 1) is measured by, between two checkouts run in turn on the same store.

    .venv/bin/python -m bench.recall_cut --database-url sqlite:///PATH --rankings OUT.json

For each query size (1, 3, 6 words), 10 queries of words held by 8–50 % of the owner's
memories (bench.queries' common band, drawn with a fixed seed), each ranked with
`rank_memories` at one fixed moment, `--rounds` times; prints the median per size of the
whole ranking and of its scoring statement (memories.recall.scoring.best_candidates), and writes
every ranking (ids and scores) to `--rankings`, so that two checkouts' files can be
compared byte for byte. Reads only: nothing is strengthened.
"""

import argparse
import importlib
import json
import random
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.database import setup_django
from bench.queries import BANDS, QUERY_SIZES

MOMENT = datetime(2026, 12, 5, 17, 0, tzinfo=UTC)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.recall_cut")
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--rankings", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    setup_django(args.database_url, migrate=False)

    from django.db import connection

    from memories.models import MemoryToken, RecallIndex, User
    from memories.services import RecallFilters, rank_memories

    recall_service = importlib.import_module("memories.services.recall")

    index = RecallIndex.objects.order_by("-live_memories").first()
    assert index is not None, "an empty database"
    owner = User.objects.get(pk=index.owner_id)
    low, high = BANDS["common"]
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT key FROM {MemoryToken._meta.db_table} WHERE owner_id = %s GROUP BY key"
            " HAVING COUNT(*) BETWEEN %s AND %s ORDER BY key",
            [owner.pk, low * index.live_memories, high * index.live_memories],
        )
        common = [key for (key,) in cursor.fetchall()]
    rng = random.Random("taproot-bench-recall-cut")
    queries = {n: [" ".join(rng.sample(common, n)) for _ in range(10)] for n in QUERY_SIZES}

    statement: list[float] = []
    scoring = recall_service.best_candidates

    def timed(*call: Any, **named: Any) -> Any:
        started = time.perf_counter()
        band = scoring(*call, **named)
        statement.append(time.perf_counter() - started)
        return band

    vars(recall_service)["best_candidates"] = timed
    rankings: dict[str, list[list[tuple[str, float]]]] = {}
    for size, texts in queries.items():
        whole: list[float] = []
        statement.clear()
        for _ in range(args.rounds):
            rankings[str(size)] = []
            for text in texts:
                started = time.perf_counter()
                ranking = rank_memories(owner, RecallFilters(query=text), now=MOMENT)
                whole.append(time.perf_counter() - started)
                rankings[str(size)].append(
                    [(str(item.candidate.id), item.score) for item in ranking.ranked]
                )
        print(
            f"{size} common words ({index.live_memories:,} memories): recall median"
            f" {_ms(whole):.1f} ms, scoring statements median {_ms(statement):.1f} ms"
        )
    args.rankings.write_text(json.dumps(rankings))


def _ms(seconds: list[float]) -> float:
    return statistics.median(seconds) * 1000


if __name__ == "__main__":
    main(sys.argv[1:])
