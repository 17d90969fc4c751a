"""Recall queries drawn from a store's own vocabulary, in three frequency bands.

A word's frequency is its document frequency among the user's memories, counted on the
index keys the recall code itself produces (`memories.recall.ranking.memory_terms`). The bands
are fixed shares of the store, so the number of candidates a query touches grows with
the store in the same proportion at every size:

- rare: in about 0.05–0.2% of the memories (at least one),
- middle: in about 0.5–2%,
- common: in about 8–50% (candidate-bound: such a query scores a large slice of the store).
"""

import random
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from bench.synthetic import SyntheticMemory
from memories.recall import DEFAULT_PROFILE, index_key, memory_terms

BANDS: dict[str, tuple[float, float]] = {
    "rare": (0.0005, 0.002),
    "middle": (0.005, 0.02),
    "common": (0.08, 0.5),
}
QUERY_SIZES = (1, 3, 6)


@dataclass(frozen=True)
class QueryPools:
    """For each band, the words in it and ready-made queries of each size."""

    band_words: dict[str, list[str]]
    queries: dict[str, dict[int, list[str]]]

    def pick(self, band: str, size: int, run: int) -> str:
        pool = self.queries[band][size]
        return pool[run % len(pool)]


def document_frequencies(memories: Iterable[SyntheticMemory]) -> Counter[str]:
    counts: Counter[str] = Counter()
    for memory in memories:
        terms = memory_terms(
            gist=memory.gist,
            content=memory.content,
            tags=memory.tags,
            search_keywords=memory.search_keywords,
            profile=DEFAULT_PROFILE,
        )
        counts.update(index_key(t) for t in terms.keywords | terms.content_only)
    return counts


def band_of(frequency: int, size: int) -> str | None:
    for band, (low, high) in BANDS.items():
        if max(1.0, low * size) <= frequency <= max(1.0, high * size):
            return band
    return None


def query_pools(memories: list[SyntheticMemory], *, seed: int, per_size: int = 60) -> QueryPools:
    frequencies = document_frequencies(memories)
    size = len(memories)
    band_words: dict[str, list[str]] = {band: [] for band in BANDS}
    # Sorted, so the pools never depend on dict or set iteration order.
    for word in sorted(frequencies):
        band = band_of(frequencies[word], size)
        if band is not None:
            band_words[band].append(word)
    rng = random.Random(f"taproot-bench-queries-{seed}-{size}")
    queries: dict[str, dict[int, list[str]]] = {}
    for band, words in band_words.items():
        queries[band] = {}
        for n_words in QUERY_SIZES:
            if len(words) < n_words:
                queries[band][n_words] = []
                continue
            queries[band][n_words] = [" ".join(rng.sample(words, n_words)) for _ in range(per_size)]
    return QueryPools(band_words=band_words, queries=queries)
