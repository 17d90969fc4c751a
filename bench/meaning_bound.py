"""Whether a coarse index could bound the meaning part cheaply (issue 32, item 2).

A worded recall that many memories match bounds the best cosine any memory has with the
query by a scan of every vector the worker holds (memories.recall.semantic, `ceiling`). A coarse
index would group the vectors (k-means, √n groups), keep each group's centre c and radius
r (its farthest vector from c), and bound a group's best dot product with a query q by

    c · q + r × |q|

reading only the groups whose bound passes the best found so far. It saves work only if
most groups' bounds fall below the best cosine. This measures, on a synthetic store
(bench.synthetic) embedded as recall embeds it, with 3-word queries of its middle-band
words (bench.queries), what share of the groups and of the vectors such a search reads.

    .venv/bin/python -m bench.meaning_bound [--size 5000] [--embedder wordllama]

Nothing here touches a database or Django.
"""

import argparse
import math
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np
import numpy.typing as npt


@dataclass(frozen=True)
class Groups:
    centres: npt.NDArray[np.float32]
    radii: npt.NDArray[np.float32]
    group_of: npt.NDArray[np.intp]

    def bounds(self, query: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        """A dot product with the query no vector of each group exceeds."""
        return self.centres @ query + self.radii * np.float32(np.linalg.norm(query))


def make_groups(matrix: npt.NDArray[np.float32], *, rounds: int = 3, seed: int = 0) -> Groups:
    """√n groups of the rows by k-means (centres sampled from the rows, then `rounds` of
    placing each row at its nearest centre and moving the centres to their rows' mean)."""
    count = max(1, int(math.sqrt(len(matrix))))
    rng = np.random.default_rng(seed)
    centres = matrix[rng.choice(len(matrix), size=count, replace=False)].copy()
    group_of = np.argmax(matrix @ centres.T, axis=1)
    for _ in range(rounds):
        for group in range(count):
            members = matrix[group_of == group]
            if len(members):
                centres[group] = members.mean(axis=0)
        group_of = np.argmax(matrix @ centres.T, axis=1)
    gaps = np.linalg.norm(matrix - centres[group_of], axis=1)
    radii = np.zeros(count, dtype=np.float32)
    np.maximum.at(radii, group_of, gaps.astype(np.float32))
    # Room for float32 rounding, so the bound holds for the exact products too.
    return Groups(centres, radii * np.float32(1 + 1e-4) + np.float32(1e-5), group_of)


@dataclass(frozen=True)
class Search:
    best: float
    groups_read: int
    rows_read: int


def best_by_groups(
    matrix: npt.NDArray[np.float32], groups: Groups, query: npt.NDArray[np.float32]
) -> Search:
    """The best dot product of the query with a row, reading the groups best bound first
    and stopping at the first whose bound the best found reaches."""
    bounds = groups.bounds(query)
    best = -math.inf
    read = rows = 0
    for group in np.argsort(-bounds, kind="stable").tolist():
        if bounds[group] <= best:
            break
        members = matrix[groups.group_of == group]
        read += 1
        rows += len(members)
        if len(members):
            best = max(best, float((members @ query).max()))
    return Search(best, read, rows)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.meaning_bound", description=__doc__)
    parser.add_argument("--size", type=int, default=5000)
    parser.add_argument("--embedder", default="wordllama")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)

    from bench.queries import query_pools
    from bench.synthetic import generate_store
    from memories.recall import embedder_named, memory_text, query_stored

    embedder = embedder_named(args.embedder)
    if embedder is None:
        parser.error("--embedder none embeds nothing")
    store = generate_store(size=args.size, now=datetime.now(UTC), seed=args.seed, other_users=0)
    mine = store.of(store.owner)
    texts = [
        memory_text(gist=m.gist, content=m.content, tags=m.tags, keywords=m.search_keywords)
        for m in mine
    ]
    vectors = [v for v in embedder.embed(texts) if v is not None]
    matrix = np.stack([query_stored(v) for v in vectors])
    groups = make_groups(matrix)
    pools = query_pools(mine, seed=args.seed)
    searches = []
    for i in range(60):
        query = embedder.embed_query(pools.pick("middle", 3, i))
        if query is not None:
            searches.append(best_by_groups(matrix, groups, query_stored(query)))
    count = len(groups.centres)
    print(f"{len(matrix):,} vectors ({embedder.name}), {count} groups, {len(searches)} queries")
    print(f"radius of a group: median {float(np.median(groups.radii)):.3f}")
    print(f"best cosine: median {statistics.median(s.best for s in searches):.3f}")
    groups_read = statistics.median(s.groups_read / count for s in searches)
    rows_read = statistics.median(s.rows_read / len(matrix) for s in searches)
    print(f"read: median {groups_read:.0%} of the groups, {rows_read:.0%} of the vectors")


if __name__ == "__main__":
    main(sys.argv[1:])
