"""What bounding the meaning part by a recall's chosen memories costs the worker, against a
scan of every vector it holds of the owner (issue 32, item 2; memories.recall.semantic,
`OwnerVectors.ceiling`).

    .venv/bin/python -m bench.chosen_scan [--size 100000] [--chosen 1000,2500,5000,...]
        [--rounds 20] [--out FILE]

Random unit vectors (what a scan costs does not depend on what they say) held under
random memory ids, as a worker holds an owner's. For each count, that many memories drawn
at random, their ids as the held postings give them (each a high and a low half), and the
most cosine among them timed, then the most among every vector. Prints the median of
`--rounds` of each, in milliseconds; `--out` writes the same as JSON rows. Nothing here
touches a database.

The code before this kept no halves; its figures came from this bench as it was then
(`git show 4e2fba8:bench/chosen_scan.py`), run from a tree of it, which gave it the ids as
whole integers made from the halves, as its postings did (docs/benchmarks.md).
"""

import argparse
import functools
import json
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

DEFAULT_CHOSEN = (1000, 2500, 5000, 8000, 12000, 17600, 25000)


def held_vectors(size: int, dimension: int, seed: int) -> tuple[Any, Any]:
    """An OwnerVectors holding `size` random unit vectors, and the halves of its ids."""
    from memories.recall import OwnerVectors, id_halves, stored

    rng = np.random.default_rng(seed)
    ids = [uuid.UUID(bytes=bytes(rng.integers(0, 256, 16, dtype=np.uint8))) for _ in range(size)]
    vectors = rng.normal(size=(size, dimension)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    held = OwnerVectors("bench", dimension, None, rows=size)
    held.apply((i, stored(vector)) for i, vector in zip(ids, vectors, strict=True))
    return held, id_halves(ids)


def median_ms(call: Callable[[], object], rounds: int) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        call()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def measure(
    size: int, chosen_counts: Sequence[int], *, rounds: int, seed: int = 7
) -> list[dict[str, Any]]:
    held, halves = held_vectors(size, 256, seed)
    rng = np.random.default_rng(seed + 1)
    query = rng.normal(size=256).astype(np.float32)
    query /= np.linalg.norm(query)
    everything = median_ms(lambda: held.ceiling(query), rounds)
    rows = []
    for count in chosen_counts:
        chosen = halves[rng.choice(size, size=min(count, size), replace=False)]
        alone = median_ms(functools.partial(held.ceiling, query, chosen), rounds)
        rows.append({"chosen": count, "alone_ms": alone, "every_vector_ms": everything})
    return rows


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.chosen_scan", description=__doc__)
    parser.add_argument("--size", type=int, default=100_000, help="memories held")
    parser.add_argument(
        "--chosen",
        default=",".join(map(str, DEFAULT_CHOSEN)),
        help="comma-separated counts of chosen memories",
    )
    parser.add_argument("--rounds", type=int, default=20, help="timings of each, for a median")
    parser.add_argument("--out", type=Path, help="write the rows here as JSON")
    args = parser.parse_args(argv)
    counts = [int(count) for count in args.chosen.split(",") if count.strip()]
    rows = measure(args.size, counts, rounds=args.rounds)
    print(f"{'chosen':>8} {'scanned alone (ms)':>20} {'every vector (ms)':>18}")
    for row in rows:
        print(f"{row['chosen']:>8,} {row['alone_ms']:>20.2f} {row['every_vector_ms']:>18.2f}")
    if args.out:
        args.out.write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
