"""The postings of common words, held by each worker (issue 32, item 1).

A recall of several words finds each match's hits by grouping every posting of its words
(memories.recall.impact, `all_hits`): at 100,000 memories three common words hold
30,000–60,000 postings, and the database's grouping of them was half the recall. A worker
that holds those postings groups them in numpy instead (`grouped_hits`), and the database
is handed only the matches that can score within reach of the cut (`impact.read_held`).
A word alone is held too: the database would read the class of its postings that can
place (`impact.read_one_word`, thousands at 100,000 memories), where the worker hands over
only those whose own salience leaves them a chance, and the meaning part is bounded by
their vectors rather than by all the owner's (half the time of a recall of one common
word at 100,000 memories, docs/benchmarks.md).

What is held must be the index exactly: hits are used as they are, and a word's document
frequency is its postings' count. Every write to an owner's index moves
RecallIndex.version in the write's transaction and records the entries it changed at that
version (IndexChange, memories.recall.indexing), and a restore gives the index a new
generation. So a word's postings are held with the generation and version
they were read at, in the same statement as N and the version (one statement sees one
state on both databases), and serve a recall only once brought up to the index's
version: the statement of the next recall of common words also reads the
changes recorded since, and the postings those entries hold now of the held words
(owner_index.statistics_and_postings), and the worker puts them in place of the
entries' old ones. Held words older than the changes kept, or of another generation,
are read again; a recall reads whole only those of its words not held. Recall ranks
outside any write transaction (memories.services.recall), so what is read, and held,
has been committed.

Each entry's salience and memory id are held beside the postings (`EntrySalience`: 17
bytes per entry id), read whole the first time an owner's words are held and followed by
the same changes: a match is handed over only when its relevance, the most history any
memory can have and its own salience part reach the cut's floor less the reach, instead
of the most salience any memory can have (at 100,000 memories, about a sixth of the
matches: docs/benchmarks.md); and the meaning part's reach is bounded by the vectors of
the memories of the matches that could place (impact.read_held). Only writes change an
entry's salience, and each records its entries; recall's strengthening changes only the
history, which keeps its global bound.

Only words worth it are held: a query whose words hold HOLD_FROM postings or more in all
(below that, grouping them in SQL costs about what grouping them here does; a word alone
below it is read in impact order, `impact.read_one_word`). The words held and the
owners' salience share a budget per worker
(TAPROOT_POSTINGS_CACHE_MB); past it, the least recently used words go, then salience.
A worker also reads ahead, as it starts, the commonest words of the owners likely to call
soon (memories.recall.warming).
"""

import threading
import uuid
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from memories.recall.impact import Matches, most_history_and_salience
from memories.recall.owner_index import (
    Changes,
    OwnerIndex,
    statistics,
    statistics_and_postings,
)
from memories.recall.ranking import ActivationConfig
from memories.vocabulary import MEDIUM

# A query, of one word or several, is served from held postings once its words hold this
# many postings in all (the sum of their document frequencies). Held from 1,000 rather
# than 4,000, a recall of three words of the middle band (500–2,000 postings each at
# 100,000 memories) took 20–40 % less time, and of three common words at 1,000 and 10,000
# memories up to a fifth less; below it, holding made no difference (docs/benchmarks.md).
HOLD_FROM = 1000


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


def _ids(listed: str | None) -> npt.NDArray[np.int64]:
    """The integers of a comma-separated list the statement aggregated (none for NULL).
    Parsed by numpy's text reader: a word's 20,000 postings in 0.8 ms, where a list of
    Python strings made into integers took 5–7 ms."""
    if not listed:
        return np.zeros(0, dtype=np.int64)
    return np.fromstring(listed, dtype=np.int64, sep=",")


def parsed(encoded: str | None, index: OwnerIndex) -> Postings:
    """A word's postings from the statement's list (owner_index.statistics_and_postings): each
    posting entry × 2, plus 1 when the word is a keyword, comma-separated."""
    values = _ids(encoded)
    return Postings(values >> 1, (values & 1).astype(np.bool_), index.generation, index.version)


# An entry whose salience is not known here: the most any memory can have is assumed.
_UNKNOWN = 255
# Entry ids an owner's salience is held over, past four per live entry: an owner whose
# entries lie far apart (many owners' writes between) is not held.
_SPARE_IDS = 65536


@dataclass(frozen=True)
class EntrySalience:
    """Each entry's salience and memory over a run of entry ids from `low`, as of the
    index's generation and version: `codes` holds, per id, the position of its salience
    in `values`, or _UNKNOWN (an id no live entry of the owner's had when read, or one
    written since whose salience came with no change); `memories`, per id, its memory's
    id as two unsigned integers (the high 64 bits, then the low), zero where not known.
    Bounds each match's salience part and its cosine in the cut (impact.read_held): only
    writes change an entry's salience, and each records its entries; an entry's memory
    never changes."""

    low: int
    codes: npt.NDArray[np.uint8]
    values: tuple[str, ...]
    generation: uuid.UUID | None
    version: int
    memories: npt.NDArray[np.uint64]

    @property
    def nbytes(self) -> int:
        return self.codes.nbytes + self.memories.nbytes + Postings.OVERHEAD

    @classmethod
    def read(cls, listed: Mapping[str, str], index: OwnerIndex) -> "EntrySalience | None":
        """From each salience's entries and their memories (a whole read); None for an
        owner whose entries lie too far apart, or too many values to code."""
        values = tuple(sorted(listed))
        read = [_entries_and_memories(listed[value]) for value in values]
        count = sum(len(entries) for entries, _ in read)
        if not count or len(values) >= _UNKNOWN:
            return None
        low = min(int(entries.min()) for entries, _ in read if len(entries))
        span = max(int(entries.max()) for entries, _ in read if len(entries)) - low + 1
        if span > 4 * count + _SPARE_IDS:
            return None
        codes = np.full(span, _UNKNOWN, dtype=np.uint8)
        memories = np.zeros((span, 2), dtype=np.uint64)
        for code, (entries, their_memories) in enumerate(read):
            codes[entries - low] = code
            memories[entries - low] = their_memories
        return cls(low, codes, values, index.generation, index.version, memories)

    def followed(
        self, changes: Changes, changed: npt.NDArray[np.int64], index: OwnerIndex
    ) -> "EntrySalience":
        """Brought up to `index` by the changes since: the changed entries unknown, then
        those still live given their salience and memory now (the run grows to take in
        new ids)."""
        codes, values, memories = self.codes.copy(), list(self.values), self.memories.copy()
        inside = changed[(changed >= self.low) & (changed < self.low + len(codes))]
        codes[inside - self.low] = _UNKNOWN
        for value, listed in changes.salience.items():
            if value not in values:
                if len(values) >= _UNKNOWN - 1:
                    continue  # left unknown: the most assumed
                values.append(value)
            entries, found = _entries_and_memories(listed)
            top = int(entries.max()) if len(entries) else 0
            if top >= self.low + len(codes) and top - self.low < len(codes) + _SPARE_IDS:
                grown = top - self.low + 1 - len(codes)
                codes = np.concatenate([codes, np.full(grown, _UNKNOWN, dtype=np.uint8)])
                memories = np.concatenate([memories, np.zeros((grown, 2), dtype=np.uint64)])
            at = entries - self.low
            placed = (at >= 0) & (at < len(codes))
            codes[at[placed]] = values.index(value)
            memories[at[placed]] = found[placed]
        return EntrySalience(
            self.low, codes, tuple(values), index.generation, index.version, memories
        )

    def parts(
        self, entries: npt.NDArray[np.int64], config: ActivationConfig, most: float
    ) -> npt.NDArray[np.float64]:
        """The salience part of each entry's score, `most` where its salience is unknown."""
        scores = config.salience_scores
        table = np.full(_UNKNOWN + 1, most, dtype=np.float64)
        for code, value in enumerate(self.values):
            table[code] = config.salience_weight * scores.get(value, scores[MEDIUM])
        found = np.full(len(entries), _UNKNOWN, dtype=np.uint8)
        at, inside = self._at(entries)
        found[inside] = self.codes[at[inside]]
        return table[found]

    def memory_keys(self, entries: npt.NDArray[np.int64]) -> npt.NDArray[np.uint64] | None:
        """Each entry's memory id as two unsigned integers, its high 64 bits then its low
        (semantic.id_halves); None when one is not known."""
        at, inside = self._at(entries)
        if not inside.all():
            return None
        pairs = self.memories[at]
        if not pairs.any(axis=1).all():
            return None
        return pairs

    def _at(
        self, entries: npt.NDArray[np.int64]
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_]]:
        """Each entry's place in the run, and whether it is inside it."""
        at = entries - self.low
        return at, (at >= 0) & (at < len(self.codes))


def _entries_and_memories(
    digits: str | None,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.uint64]]:
    """Entry ids and their memories' ids (each two unsigned integers, the high 64 bits then
    the low) from the statement's list: 48 hexadecimal digits an entry, 16 of its id then
    32 of its memory's (owner_index._entries_and_memories)."""
    words = np.frombuffer(bytes.fromhex(digits or ""), dtype=">u8").reshape(-1, 3)
    return words[:, 0].astype(np.int64), words[:, 1:].astype(np.uint64)


@dataclass(frozen=True)
class Held:
    """What a recall finds held of its words: each word's postings, and each entry's
    salience when held as of the same version (None: not held, or of another)."""

    postings: dict[str, Postings]
    salience: EntrySalience | None


def _followed(
    held: Mapping[str, Postings],
    salience: EntrySalience | None,
    index: OwnerIndex,
    changes: Changes,
) -> tuple[Mapping[str, Postings], EntrySalience | None] | None:
    """The held postings and salience brought up to `index` by the changes recorded since
    the oldest of them (themselves when none); None when they cannot be: of another
    generation, newer than `index` (read by a later recall), or older than the changes
    kept. An entry's postings are dropped and those it holds now added, so a word already
    past some of the changes is brought up all the same."""
    kept = [(p.generation, p.version) for p in held.values()]
    if salience is not None:
        kept.append((salience.generation, salience.version))
    if any(
        generation != index.generation or version > index.version for generation, version in kept
    ):
        return None
    since = min(version for _, version in kept)
    if changes.versions != index.version - since:
        return None
    if not changes.versions:
        return held, salience
    changed = np.unique(_ids(changes.entries))
    followed = {}
    for key, postings in held.items():
        kept_now = ~np.isin(postings.entries, changed)
        now = parsed(changes.postings.get(key), index)
        followed[key] = Postings(
            np.concatenate([postings.entries[kept_now], now.entries]),
            np.concatenate([postings.in_keywords[kept_now], now.in_keywords]),
            index.generation,
            index.version,
        )
    if salience is not None:
        salience = salience.followed(changes, changed, index)
    return followed, salience


def matches_of(
    held: Held, weights: Mapping[str, int], factors: tuple[int, int], config: ActivationConfig
) -> Matches:
    """The query's matches and their hits from its words held (`grouped_hits`), with
    each one's salience part where the entries' salience is held."""
    matches = grouped_hits(held.postings, weights, factors)
    if held.salience is None:
        return matches
    _, most_salience = most_history_and_salience(config)
    parts = held.salience.parts(matches.entries, config, most_salience)
    return Matches(matches.entries, matches.hits, parts, held.salience.memory_keys)


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
        self._salience: OrderedDict[int, EntrySalience] = OrderedDict()  # by owner
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

    def statistics(self, owner_id: int, keys: Sequence[str]) -> tuple[OwnerIndex, Held | None]:
        """N, the index's version and each key's document frequency (owner_index.statistics),
        and, for a query whose words hold HOLD_FROM postings or more, their
        postings: those held, brought up to the index by the changes recorded since, the
        others read in the same statement as N and the version, and held; and each
        entry's salience, held and followed the same way (read whole, in a statement of
        its own, the first time)."""
        if not keys or self.budget <= 0:
            return statistics(owner_id, keys), None
        held = self._held(owner_id, keys)
        salience = self._salience_held(owner_id)
        versions = [p.version for p in held.values()] + ([salience.version] if salience else [])
        since = min(versions, default=None)
        read = statistics_and_postings(
            owner_id, [k for k in keys if k not in held], held=sorted(held), since=since
        )
        if since is not None:
            followed = _followed(held, salience, read.index, read.changes)
            if followed is None:  # not all the changes are recorded still: read them again
                held, salience = {}, None
                read = statistics_and_postings(owner_id, keys)
            else:
                now_held, now_salience = followed
                if now_held is not held:
                    held = dict(now_held)
                    self._keep(owner_id, held)
                if now_salience is not None and now_salience is not salience:
                    salience = now_salience
                    self._keep_salience(owner_id, salience)
        index = read.index
        df = {key: len(p.entries) for key, p in held.items() if len(p.entries)} | index.df
        index = OwnerIndex(index.live, df, index.version, index.generation)
        if sum(df.values()) < HOLD_FROM:
            return index, None
        words = {key: parsed(read.postings.get(key), index) for key in keys if key not in held}
        self._keep(owner_id, words)
        if salience is None:
            whole = statistics_and_postings(owner_id, [], salience=True)
            salience = EntrySalience.read(whole.salience, whole.index)
            if salience is not None:
                self._keep_salience(owner_id, salience)
        if salience is not None and (salience.generation, salience.version) != (
            index.generation,
            index.version,
        ):
            salience = None  # read at another state than this recall's: not used by it
        return index, Held(held | words, salience)

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
            self._let_go(budget)

    def _salience_held(self, owner_id: int) -> EntrySalience | None:
        with self._table:
            found = self._salience.get(owner_id)
            if found is not None:
                self._salience.move_to_end(owner_id)
            return found

    def _keep_salience(self, owner_id: int, salience: EntrySalience) -> None:
        """Hold the owner's salience (unless a newer read is held already)."""
        with self._table:
            current = self._salience.get(owner_id)
            if (
                current is None
                or current.generation != salience.generation
                or current.version <= salience.version
            ):
                self._bytes += salience.nbytes - (current.nbytes if current else 0)
                self._salience[owner_id] = salience
            self._salience.move_to_end(owner_id)
            self._let_go(self.budget)

    def _let_go(self, budget: int) -> None:
        """While past the budget, let the least recently used words go, then salience."""
        while self._words and self._bytes > budget:
            _, gone = self._words.popitem(last=False)
            self._bytes -= gone.nbytes
        while self._salience and self._bytes > budget:
            _, lost = self._salience.popitem(last=False)
            self._bytes -= lost.nbytes

    def clear(self) -> None:
        with self._table:
            self._words.clear()
            self._salience.clear()
            self._bytes = 0


POSTINGS = PostingsCache()
