"""What holding common words' postings in the worker saves a recall of several of them
(issue 32, item 1; memories.recall.postings): measured on a prepared store, in process.

    .venv/bin/python -m bench.held_postings --database-url URL [--rounds 5] [--out FILE]

A recall of several words finds each match's hits by grouping every posting of its words
(memories.recall.impact, `all_hits`): at 100,000 memories three common words hold
30,000–60,000 postings. A worker holding them groups them in numpy and hands the
database only the matches that can place. Three ways, in turn, for each query:

- grouped by the database: no postings held (TAPROOT_POSTINGS_CACHE_MB=0), as before;
- first recall: none held yet, so the recall reads the words' postings and holds them
  (what the first recall of those words after a write costs);
- postings held: the words held, as every later recall of them finds them until the
  owner's next write.

For each query size (3, 6 words), 10 queries of words held by 8–50 % of the owner's
memories (the common band of bench.queries, drawn with a fixed seed), each ranked
`--rounds` times each way at one fixed moment; prints per size the median ranking each
way and whether every ranking is identical. `--out` writes the same as JSON rows. Reads
only: nothing is strengthened.
"""

import argparse
import json
import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.database import setup_django
from bench.queries import BANDS

MOMENT = datetime(2026, 12, 5, 17, 0, tzinfo=UTC)
SIZES = (3, 6)
MODES = ("grouped by the database", "first recall", "postings held")


@dataclass
class Measured:
    timings: dict[str, list[float]]  # by mode
    identical: int  # queries ranked alike by every mode in every round
    queries: int


def common_words(owner_id: int, live: int) -> list[str]:
    from django.db import connection

    from memories.models import MemoryToken

    low, high = BANDS["common"]
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT key FROM {MemoryToken._meta.db_table} WHERE owner_id = %s GROUP BY key"
            " HAVING COUNT(*) BETWEEN %s AND %s ORDER BY key",
            [owner_id, low * live, high * live],
        )
        return [key for (key,) in cursor.fetchall()]


def ways(budget_mb: int) -> dict[str, Callable[[], None]]:
    """What to do before a ranking, for each mode: the cache's budget set, and emptied for a
    first recall."""
    from django.conf import settings

    from memories.recall import POSTINGS

    def grouped() -> None:
        settings.TAPROOT_POSTINGS_CACHE_MB = 0

    def first() -> None:
        settings.TAPROOT_POSTINGS_CACHE_MB = budget_mb
        POSTINGS.clear()

    def held() -> None:
        settings.TAPROOT_POSTINGS_CACHE_MB = budget_mb

    return dict(zip(MODES, (grouped, first, held), strict=True))


def measure(owner: Any, queries: Sequence[str], *, rounds: int) -> Measured:
    """Each query ranked each way (MODES) in turn, `rounds` times."""
    from django.conf import settings

    from memories.services import RecallFilters, rank_memories

    before = ways(int(settings.TAPROOT_POSTINGS_CACHE_MB))
    result = Measured({mode: [] for mode in MODES}, 0, len(queries))
    try:
        for text in queries:
            rankings = []
            for _ in range(rounds):
                for mode, prepare in before.items():
                    prepare()
                    started = time.perf_counter()
                    ranking = rank_memories(owner, RecallFilters(query=text), now=MOMENT)
                    result.timings[mode].append(time.perf_counter() - started)
                    rankings.append([(item.candidate.id, item.score) for item in ranking.ranked])
            result.identical += all(ranking == rankings[0] for ranking in rankings)
    finally:
        before["postings held"]()
    return result


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.held_postings")
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    setup_django(args.database_url, migrate=False)

    from django.db import connection

    from memories.models import RecallIndex, User

    index = RecallIndex.objects.order_by("-live_memories").first()
    if index is None:
        sys.exit("The database holds no memories: give a prepared store.")
    owner = User.objects.get(pk=index.owner_id)
    words = common_words(owner.pk, index.live_memories)
    rng = random.Random("taproot-bench-held-postings")
    rows = []
    for size in SIZES:
        queries = [" ".join(rng.sample(words, size)) for _ in range(10)]
        found = measure(owner, queries, rounds=args.rounds)
        row: dict[str, Any] = {
            "database": connection.vendor,
            "memories": index.live_memories,
            "words": size,
            **{f"{mode} (ms)": _ms(found.timings[mode]) for mode in MODES},
            "identical rankings": f"{found.identical} of {found.queries}",
        }
        rows.append(row)
        print(
            f"{size} common words, {index.live_memories:,} memories, ranking medians: "
            + ", ".join(f"{mode} {row[f'{mode} (ms)']} ms" for mode in MODES)
            + f"; identical rankings: {row['identical rankings']}"
        )
    if args.out:
        args.out.write_text(json.dumps(rows, indent=1) + "\n")


def _ms(seconds: list[float]) -> float:
    return round(statistics.median(seconds) * 1000, 1)


if __name__ == "__main__":
    main(sys.argv[1:])
