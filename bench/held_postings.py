"""What holding common words' postings in the worker saves a recall of one or several of
them (issue 32, item 1; memories.recall.postings): measured on a prepared store, in process.

    .venv/bin/python -m bench.held_postings --database-url URL [--rounds 5] [--writes]
        [--out FILE]

A recall of several words finds each match's hits by grouping every posting of its words
(memories.recall.impact, `all_hits`): at 100,000 memories three common words hold
30,000–60,000 postings. A worker holding them groups them in numpy and hands the
database only the matches that can place; a word alone is held the same way. Unheld, a
recall of one word has the database read the class of its postings that can place
(`impact.read_one_word`). Three ways, in turn, for each query:

- grouped by the database: no postings held (TAPROOT_POSTINGS_CACHE_MB=0), as before
  (one word: its postings that can place read by the database);
- first recall: none held yet, so the recall reads the words' postings and holds them
  (what the first recall of those words in a worker costs);
- postings held: the words held, as every later recall of them finds them.

For each query size (1, 3, 6 words), 10 queries of words held by 8–50 % of the owner's
memories (the common band of bench.queries, drawn with a fixed seed), each ranked
`--rounds` times each way at one fixed moment; prints per size the median ranking each
way and whether every ranking is identical. `--out` writes the same as JSON rows. Reads
only: nothing is strengthened.

With `--writes`, then, for 10 more queries of each size, `--rounds` times: a memory of
other common words written, and the query ranked from its held words brought up to that
write (the changes it recorded), then with none held (read whole), the two compared. This
writes to the store: give it a copy.
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
SIZES = (1, 3, 6)
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


# After a write: the held words brought up to it (the changes it recorded), then, for the
# same state of the store, read whole again.
AFTER = ("after a write, followed", "after a write, read whole")


def measure_after_writes(
    owner: Any, queries: Sequence[str], words: Sequence[str], *, rounds: int
) -> Measured:
    """Each query ranked once, holding its words; then, `rounds` times, a memory of four
    other common words written (a remember, as Claude makes one), and the query ranked
    from the held words brought up to that write, then with none held (read whole)."""
    from mcp_bridge import handlers
    from memories.recall import POSTINGS
    from memories.services import RecallFilters, rank_memories

    rng = random.Random("taproot-bench-held-postings-writes")
    result = Measured({mode: [] for mode in AFTER}, 0, len(queries))
    for text in queries:
        others = [word for word in words if word not in text.split()]
        rank_memories(owner, RecallFilters(query=text), now=MOMENT)
        alike = True
        for n in range(rounds):
            handlers.remember(
                owner=owner,
                category="episodic",
                gist=f"Written between recalls {n}",
                content=" ".join(rng.sample(others, min(4, len(others)))) + ".",
                salience="medium",
                now=MOMENT,
            )
            rankings = []
            for mode in AFTER:
                if mode == AFTER[1]:
                    POSTINGS.clear()
                started = time.perf_counter()
                ranking = rank_memories(owner, RecallFilters(query=text), now=MOMENT)
                result.timings[mode].append(time.perf_counter() - started)
                rankings.append([(item.candidate.id, item.score) for item in ranking.ranked])
            alike = alike and rankings[0] == rankings[1]
        result.identical += alike
    return result


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.held_postings")
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out", type=Path)
    parser.add_argument(
        "--writes",
        action="store_true",
        help="also rank after writes (the store given gains a memory per round: a copy)",
    )
    args = parser.parse_args(argv)
    # Migrated: a write records its change (IndexChange).
    setup_django(args.database_url, migrate=args.writes)

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
        heading = f"{size} common words, {index.live_memories:,} memories, ranking"
        rows.append(_reported(found, MODES, index.live_memories, size, heading))
    if args.writes:
        # Last: each round writes a memory to the store.
        for size in SIZES:
            queries = [" ".join(rng.sample(words, size)) for _ in range(10)]
            found = measure_after_writes(owner, queries, words, rounds=args.rounds)
            heading = f"{size} common words, each ranking after a write,"
            rows.append(_reported(found, AFTER, index.live_memories, size, heading))
    if args.out:
        args.out.write_text(json.dumps(rows, indent=1) + "\n")


def _reported(
    found: Measured, modes: Sequence[str], memories: int, words: int, heading: str
) -> dict[str, Any]:
    """The row of `found`'s medians each way of `modes`, printed after `heading`."""
    from django.db import connection

    row: dict[str, Any] = {
        "database": connection.vendor,
        "memories": memories,
        "words": words,
        **{f"{mode} (ms)": _ms(found.timings[mode]) for mode in modes},
        "identical rankings": f"{found.identical} of {found.queries}",
    }
    print(
        f"{heading} medians: "
        + ", ".join(f"{mode} {row[f'{mode} (ms)']} ms" for mode in modes)
        + f"; identical rankings: {row['identical rankings']}"
    )
    return row


def _ms(seconds: list[float]) -> float:
    return round(statistics.median(seconds) * 1000, 1)


if __name__ == "__main__":
    main(sys.argv[1:])
