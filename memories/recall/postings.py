"""The postings of common words, held by each worker (issue 32, item 1).

A recall of several words finds each match's hits by grouping every posting of its words
(memories.recall.impact, `all_hits`): at 100,000 memories three common words hold
30,000–60,000 postings, and the database's grouping of them was half the recall. A worker
that holds those postings groups them in numpy instead (`grouped_hits`), and the database
is handed only the matches that can score within reach of the cut (`impact.read_held`).

What is held must be the index exactly: hits are used as they are, and a word's document
frequency is its postings' count. Every write to an owner's index moves
RecallIndex.version in the write's transaction and records the entries whose tokens it
changed at that version (IndexChange, memories.recall.indexing), and a restore gives the
index a new generation. So a word's postings are held with the generation and version
they were read at, in the same statement as N and the version (one statement sees one
state on both databases), and serve a recall only once brought up to the index's
version: the statement of the next recall of several common words also reads the
changes recorded since, and the postings those entries hold now of the held words
(owner_index.statistics_and_postings), and the worker puts them in place of the
entries' old ones. Held words older than the changes kept, or of another generation,
are read again; a recall reads whole only those of its words not held. Recall ranks
outside any write transaction (memories.services.recall), so what is read, and held,
has been committed.

Only words worth it are held: a query whose words hold HOLD_FROM postings or more in all
(below that, grouping them in SQL costs about what handing the matches over does). The
words held share a budget per worker (TAPROOT_POSTINGS_CACHE_MB); past it, the least
recently used go.
"""

import threading
import uuid
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from memories.recall.impact import Matches
from memories.recall.owner_index import Changes, OwnerIndex, statistics, statistics_and_postings

# A query of several words is served from held postings once its words hold this many
# postings in all (the sum of their document frequencies): at 10,000 memories three common
# words hold about 4,000, and their grouping in SQL about 3 ms (docs/benchmarks.md).
HOLD_FROM = 4000


@dataclass(frozen=True)
class Postings:
    """One word's postings in an owner's index: each memory's entry holding it and whether
    the word is among that memory's keywords, as of the index's generation and version."""

    entries: npt.NDArray[np.int64]
    in_keywords: npt.NDArray[np.bool_]
    generation: uuid.UUID | None
    version: int

    # What holding a word costs besides its arrays: its key, the dictionary's slot.
    OVERHEAD = 256

    @property
    def nbytes(self) -> int:
        return self.entries.nbytes + self.in_keywords.nbytes + self.OVERHEAD

    def of(self, index: OwnerIndex) -> bool:
        """Whether these are the postings of the index as `index` read it."""
        return self.generation == index.generation and self.version == index.version


def parsed(encoded: str | None, index: OwnerIndex) -> Postings:
    """A word's postings from the statement's list (scoring.statistics_and_postings): each
    posting entry × 2, plus 1 when the word is a keyword, comma-separated."""
    values = (
        np.array(encoded.split(","), dtype=np.int64) if encoded else np.zeros(0, dtype=np.int64)
    )
    return Postings(values >> 1, (values & 1).astype(np.bool_), index.generation, index.version)


def _followed(
    held: Mapping[str, Postings], index: OwnerIndex, changes: Changes
) -> Mapping[str, Postings] | None:
    """The held postings brought up to `index` by the changes recorded since the oldest
    of them (`held` itself when none); None when they cannot be: of another generation,
    newer than `index` (read by a later recall), or older than the changes kept. An
    entry's postings are dropped and those it holds now added, so a word already past
    some of the changes is brought up all the same."""
    if any(p.generation != index.generation or p.version > index.version for p in held.values()):
        return None
    since = min(p.version for p in held.values())
    if changes.versions != index.version - since:
        return None
    if not changes.versions:
        return held
    changed = (
        np.unique(np.array(changes.entries.split(","), dtype=np.int64))
        if changes.entries
        else np.zeros(0, dtype=np.int64)
    )
    followed = {}
    for key, postings in held.items():
        kept = ~np.isin(postings.entries, changed)
        now = parsed(changes.postings.get(key), index)
        followed[key] = Postings(
            np.concatenate([postings.entries[kept], now.entries]),
            np.concatenate([postings.in_keywords[kept], now.in_keywords]),
            index.generation,
            index.version,
        )
    return followed


def grouped_hits(
    held: Mapping[str, Postings], weights: Mapping[str, int], factors: tuple[int, int]
) -> Matches:
    """Each match's entry (ascending) and its hits, the sum `impact.hits_sum` computes: per
    posting, the word's weight times the keyword or the content factor."""
    keyword, content = factors
    words = [(held[key], weight) for key, weight in weights.items() if len(held[key].entries)]
    if not words:
        empty = np.zeros(0, dtype=np.int64)
        return Matches(empty, empty)
    low = min(int(p.entries.min()) for p, _ in words)
    span = max(int(p.entries.max()) for p, _ in words) - low + 1
    total = sum(len(p.entries) for p, _ in words)
    if span > 4 * total or min(keyword, content) * min(w for _, w in words) <= 0:
        # Entries far apart, or a posting worth nothing: grouped by sorting.
        entries = np.concatenate([p.entries for p, _ in words])
        worth = np.concatenate([_worth(p, weight, factors) for p, weight in words])
        matches, where = np.unique(entries, return_inverse=True)
        return Matches(matches, np.bincount(where, weights=worth).astype(np.int64))
    # An owner's entries mostly in one run of ids: counted by id. A word holds an entry at
    # most once, so each word's postings add to distinct places; every posting is worth
    # something, so the places that hold a sum are the matches.
    sums = np.zeros(span, dtype=np.int64)
    for postings, weight in words:
        sums[postings.entries - low] += _worth(postings, weight, factors)
    present = np.flatnonzero(sums)
    return Matches(present + low, sums[present])


def _worth(postings: Postings, weight: int, factors: tuple[int, int]) -> npt.NDArray[np.int64]:
    """What each of a word's postings adds to its memory's hits."""
    keyword, content = factors
    return np.where(postings.in_keywords, keyword * weight, content * weight)


class PostingsCache:
    """Words' postings, by owner and index key, kept per worker process while they are the
    index's (see the module's doc). The database is read under no lock: two recalls may
    read the same words at once, and the later version read is kept."""

    def __init__(self, budget: int | None = None) -> None:
        self._words: OrderedDict[tuple[int, str], Postings] = OrderedDict()
        self._table = threading.Lock()  # held only to look words up, add and let them go
        self._bytes = 0  # what the words held take together
        self._budget = budget

    @property
    def budget(self) -> int:
        """Bytes the words held may take together (TAPROOT_POSTINGS_CACHE_MB unless given)."""
        if self._budget is not None:
            return self._budget
        from django.conf import settings

        return int(settings.TAPROOT_POSTINGS_CACHE_MB) * 1024 * 1024

    def held_bytes(self) -> int:
        with self._table:
            return self._bytes

    def holds(self, owner_id: int, key: str) -> bool:
        with self._table:
            return (owner_id, key) in self._words

    def statistics(
        self, owner_id: int, keys: Sequence[str]
    ) -> tuple[OwnerIndex, dict[str, Postings] | None]:
        """N, the index's version and each key's document frequency (owner_index.statistics),
        and, for a query of several words holding HOLD_FROM postings or more, their
        postings: those held, brought up to the index by the changes recorded since, the
        others read in the same statement as N and the version, and held."""
        if len(keys) < 2 or self.budget <= 0:
            return statistics(owner_id, keys), None
        held = self._held(owner_id, keys)
        since = min((p.version for p in held.values()), default=None)
        index, encoded, changes = statistics_and_postings(
            owner_id, [k for k in keys if k not in held], held=sorted(held), since=since
        )
        if held:
            followed = _followed(held, index, changes)
            if followed is None:  # not all the changes are recorded still: read them again
                held = {}
                index, encoded, _ = statistics_and_postings(owner_id, keys)
            elif followed is not held:
                held = dict(followed)
                self._keep(owner_id, held)
        df = {key: len(p.entries) for key, p in held.items() if len(p.entries)} | index.df
        index = OwnerIndex(index.live, df, index.version, index.generation)
        if sum(df.values()) < HOLD_FROM:
            return index, None
        read = {key: parsed(encoded.get(key), index) for key in keys if key not in held}
        self._keep(owner_id, read)
        return index, held | read

    def _held(self, owner_id: int, keys: Sequence[str]) -> dict[str, Postings]:
        """The postings held of these keys (maybe stale), by key."""
        with self._table:
            found = {key: self._words.get((owner_id, key)) for key in keys}
            held = {key: postings for key, postings in found.items() if postings is not None}
            for key in held:
                self._words.move_to_end((owner_id, key))
        return held

    def _keep(self, owner_id: int, read: Mapping[str, Postings]) -> None:
        """Hold these words (unless a newer read of one is held already), and let the least
        recently used go while all of them pass the budget. Words alone past the budget are
        used, not kept."""
        budget = self.budget
        with self._table:
            for key, postings in read.items():
                current = self._words.get((owner_id, key))
                if (
                    current is None
                    or current.generation != postings.generation
                    or current.version <= postings.version
                ):
                    self._bytes += postings.nbytes - (current.nbytes if current else 0)
                    self._words[(owner_id, key)] = postings
                self._words.move_to_end((owner_id, key))
            while self._words and self._bytes > budget:
                _, gone = self._words.popitem(last=False)
                self._bytes -= gone.nbytes

    def clear(self) -> None:
        with self._table:
            self._words.clear()
            self._bytes = 0


POSTINGS = PostingsCache()
