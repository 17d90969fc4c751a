"""Recall by meaning (SPEC §3.2): memory vectors, their exact cosines, and an owner's
vectors as a worker holds them (each worker's cache of them: vector_cache).

A cosine here is the dot product of two stored (float16) unit vectors, computed exactly in
integers and rounded once to thousandths, so it is the same number on every backend,
machine and run; negative cosines count as 0. A worker holds each owner's vectors as a
float32 matrix: recall takes its lexical matches' cosines from it (exact: the matrix holds
the stored float16 values), scans it for the "meaning alone" places, and bounds the best
cosine any memory has with a query that many memories match.
"""

import math
import mmap
import threading
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from memories.recall.embedding import STORED_DTYPE, Embedder, Vector, from_bytes, to_bytes

# float16 values are whole multiples of 2**-24, so scaled by 2**24 they are exact integers,
# and so are the products of two of them (2**-48).
_SCALE = 2**24
_PRODUCT = _SCALE * _SCALE
# Thousandths by which a float32 scan of cosines may miss the exact one (float32 sums of a
# few hundred products, far under a thousandth), and then some.
_SCAN_ROOM = 2
# Rows copied out at once to scan a recall's chosen memories: 512 KB.
_GATHERED = 512


# What an embedder reads of a memory or a query, at most. Its cost grows with the text
# (20,000 emoji took wordllama 0.28 s, their first 2,000 8 ms) while what a vector says of
# a long text is settled by its beginning, which holds the gist and the keywords. Every
# LoCoMo memory and question is shorter (the longest memory text is under 600 characters),
# so retrieval there is unchanged; MiniLM reads only its first 256 word pieces anyway.
EMBEDDED_CHARS = 2_000


def memory_text(*, gist: str, content: str, tags: Sequence[str], keywords: Sequence[str]) -> str:
    """What a memory's vector is made of: gist, keywords, tags and content, space apart (a
    separator is a token too, and would pull every vector toward its own), cut to
    EMBEDDED_CHARS."""
    joined = " ".join(part for part in [gist, *keywords, *tags, content] if part.strip())
    return joined[:EMBEDDED_CHARS]


def query_text(query: str) -> str:
    """What a query's vector is made of: its first EMBEDDED_CHARS characters."""
    return query[:EMBEDDED_CHARS]


@dataclass(frozen=True)
class QueryVector:
    """A query's vector, embedded ahead of the recall that uses it (by mcp_bridge, on
    threads of its own rather than the database's)."""

    embedder: str
    text: str
    vector: Vector | None


def embed_query(semantic: Embedder, query: str, ahead: QueryVector | None = None) -> Vector | None:
    """The vector of `query`: the one embedded ahead when it is of this query by this
    embedder, else embedded here."""
    text = query_text(query)
    if ahead is not None and ahead.embedder == semantic.name and ahead.text == text:
        return ahead.vector
    return semantic.embed_query(text)


def id_halves(ids: Sequence[uuid.UUID]) -> npt.NDArray[np.uint64]:
    """Each id as two unsigned integers, its high 64 bits then its low."""
    joined = b"".join(memory_id.bytes for memory_id in ids)
    return np.frombuffer(joined, dtype=">u8").reshape(-1, 2).astype(np.uint64)


def stored(vector: Vector | None) -> bytes:
    """A vector as stored; no bytes for a text without tokens."""
    return b"" if vector is None else to_bytes(vector)


def as_integers(vectors: npt.NDArray[np.float32]) -> npt.NDArray[np.int64]:
    """Rows of float16 values (held as float32) as exact integers, scaled by 2**24."""
    return (vectors.astype(np.float64) * _SCALE).astype(np.int64)


def cosines_milli(dots: npt.NDArray[np.int64]) -> list[int]:
    """max(0, cosine) in thousandths, rounded half to even, of each exact scaled dot (a dot
    of unit vectors is at most 2**48, so a thousand of it stays exact in 64 bits)."""
    whole, rest = np.divmod(np.maximum(dots, 0) * 1000, _PRODUCT)
    up = (2 * rest > _PRODUCT) | ((2 * rest == _PRODUCT) & (whole % 2 == 1))
    milli: list[int] = (whole + up).tolist()
    return milli


def cosines(query: Vector, vectors: Sequence[bytes | None]) -> list[int | None]:
    """Exact cosines (thousandths) of the query with stored vectors; None where a memory
    has no vector."""
    present = [i for i, data in enumerate(vectors) if data]
    result: list[int | None] = [None] * len(vectors)
    if not present:
        return result
    matrix = np.stack([from_bytes(vectors[i]) for i in present])  # type: ignore[arg-type]
    dots = as_integers(matrix) @ as_integers(query_stored(query))
    for i, milli in zip(present, cosines_milli(dots), strict=True):
        result[i] = milli
    return result


def scan(
    matrix: npt.NDArray[np.float32], query: npt.NDArray[np.float32]
) -> npt.NDArray[np.float32]:
    """Each row's float32 dot with the query. numpy's own loop (einsum), not the BLAS: on
    one core OpenBLAS's product of a row-major matrix and a vector took twice as long
    (100,000 × 256: 10 ms against 5, docs/benchmarks.md); both sum a row far inside
    _SCAN_ROOM of its exact value."""
    dots: npt.NDArray[np.float32] = np.einsum("ij,j->i", matrix, query)
    return dots


def query_stored(query: Vector) -> npt.NDArray[np.float32]:
    """The query vector rounded as a stored one is, so both sides are float16 values."""
    return query.astype(STORED_DTYPE).astype(np.float32)


class OwnerVectors:
    """One owner's vectors as a worker holds them: rows of a float32 matrix that grows by a
    quarter when it fills, so taking in a new memory rarely copies anything. Its lock
    guards the rows: a scan never sees one half written."""

    # What a held memory costs besides its row: its id, the dictionary entry that finds
    # the row, the list slot (measured: about 230 bytes).
    ID_BYTES = 256

    def __init__(
        self, embedder: str, dimension: int, generation: uuid.UUID | None, *, rows: int = 0
    ) -> None:
        self.embedder = embedder
        self.generation = generation
        self.version = -1
        self.lock = threading.Lock()
        self.ids: list[uuid.UUID] = []
        # Row of each memory, by its id as an integer (uuid.UUID.int): a recall looks up
        # hundreds, and an integer hashes without Python code.
        self.row_of: dict[int, int] = {}
        self._rows = mapped_rows(max(rows, 64), dimension)
        # Rows whose memory has no vector now (its text lost every token).
        self.empty: set[int] = set()
        # Each row's memory id as two unsigned integers, its high 64 bits then its low (as
        # the held postings give a match's memory), and the rows by their high halves,
        # sorted, as of `_sorted` rows: a recall finds thousands of rows by searching
        # these rather than by one dictionary look-up each (memories.recall.impact).
        self._halves = np.zeros((len(self._rows), 2), dtype=np.uint64)
        self._by_high: tuple[npt.NDArray[np.uint64], npt.NDArray[np.intp]] | None = None
        self._sorted = 0

    @property
    def nbytes(self) -> int:
        """About what holding these vectors costs the worker."""
        return self._rows.nbytes + self._halves.nbytes + self.ID_BYTES * len(self.ids)

    @property
    def matrix(self) -> npt.NDArray[np.float32]:
        return self._rows[: len(self.ids)]

    def apply(self, rows: Iterable[tuple[uuid.UUID, bytes]]) -> None:
        """Take in new or changed vectors (no bytes: the memory has none now)."""
        held = len(self.ids)
        for memory_id, data in rows:
            row = self.row_of.get(memory_id.int)
            if row is None:
                row = self.row_of[memory_id.int] = len(self.ids)
                self.ids.append(memory_id)
                if row == len(self._rows):
                    grown = mapped_rows(len(self._rows) * 5 // 4 + 64, self._rows.shape[1])
                    grown[:row] = self._rows
                    self._rows = grown
            if data:
                self._rows[row] = from_bytes(data)
                self.empty.discard(row)
            else:
                self._rows[row] = 0
                self.empty.add(row)
        if len(self.ids) > held:
            more = len(self._rows) - len(self._halves)
            if more:
                self._halves = np.concatenate([self._halves, np.zeros((more, 2), np.uint64)])
            self._halves[held : len(self.ids)] = id_halves(self.ids[held:])

    def rows_of(self, keys: npt.NDArray[np.uint64]) -> npt.NDArray[np.intp]:
        """The rows of these memories (keys: ids as halves, `id_halves`), in no order;
        those not held are left out.

        A key is searched among the high halves sorted; one not found there (written
        since they were sorted, sharing its high half with another id, or not held) is
        looked up by its whole id. The halves are sorted again once an eighth of the rows
        came after them."""
        count = len(self.ids)
        if not count or not len(keys):
            return np.zeros(0, dtype=np.intp)
        if self._by_high is None or count - self._sorted > count // 8:
            order = np.argsort(self._halves[:count, 0], kind="stable")
            self._by_high, self._sorted = (self._halves[order, 0], order), count
        highs, order = self._by_high
        rows = order[np.minimum(np.searchsorted(highs, keys[:, 0]), len(order) - 1)]
        found = (self._halves[rows] == keys).all(axis=1)
        if found.all():
            return rows
        rest = (self.row_of.get((high << 64) | low) for high, low in keys[~found].tolist())
        return np.concatenate(
            [rows[found], np.array([row for row in rest if row is not None], dtype=np.intp)]
        )

    def cosines_of(self, query: Vector, keys: Sequence[int]) -> dict[int, int | None]:
        """Exact cosines (thousandths) of the query with these memories' vectors (keys: ids
        as integers): None for a memory whose text has no vector; memories this cache
        does not hold are left out."""
        found: dict[int, int | None] = {}
        vectored: list[int] = []
        rows: list[int] = []
        for i in keys:
            row = self.row_of.get(i)
            if row is None:
                continue
            if row in self.empty:
                found[i] = None
            else:
                vectored.append(i)
                rows.append(row)
        if rows:
            dots = as_integers(self.matrix[rows]) @ as_integers(query_stored(query))
            found.update(zip(vectored, cosines_milli(dots), strict=True))
        return found

    def ceiling(self, query: Vector, keys: npt.NDArray[np.uint64] | None = None) -> int:
        """A cosine (thousandths) no memory held here exceeds with the query, or none of
        these memories (keys: ids as halves, `id_halves`; one not held has no vector,
        cosine 0): the float32 scan's best, with room for its rounding. Chosen rows are
        copied out and scanned a few hundred at a time, so that the copy stays in the
        processor's cache."""
        target = query_stored(query)
        if keys is None:
            bests = [scan(self.matrix, target).max()] if self.ids else []
        else:
            rows = np.sort(self.rows_of(keys))
            bests = [
                scan(self.matrix[rows[start : start + _GATHERED]], target).max()
                for start in range(0, len(rows), _GATHERED)
            ]
        if not bests:
            return 0
        return min(1000, max(0, math.ceil(1000 * float(max(bests))) + _SCAN_ROOM))

    def nearest(
        self, query: Vector, *, floor_milli: int, limit: int, exclude: set[uuid.UUID]
    ) -> list[tuple[uuid.UUID, int]]:
        """Up to `limit` memories whose exact cosine reaches the floor, best first (ties by
        id): a float32 scan finds them, with room for its rounding, then exact cosines."""
        if not self.ids:
            return []
        target = query_stored(query)
        approx = scan(self.matrix, target)
        reach = np.flatnonzero(approx >= (floor_milli - _SCAN_ROOM) / 1000)
        reach = reach[np.argsort(-approx[reach], kind="stable")]
        found: list[tuple[uuid.UUID, int]] = []
        exact_query = as_integers(target)
        # More than asked for: exact rounding may reorder near neighbours.
        for start in range(0, len(reach), 4 * limit + 16):
            chunk = reach[start : start + 4 * limit + 16].tolist()
            dots = as_integers(self.matrix[chunk]) @ exact_query
            for i, milli in zip(chunk, cosines_milli(dots), strict=True):
                if milli >= floor_milli and self.ids[i] not in exclude and i not in self.empty:
                    found.append((self.ids[i], milli))
            if len(found) >= limit:
                break
        found.sort(key=lambda pair: (-pair[1], str(pair[0])))
        return found[:limit]


def mapped_rows(count: int, dimension: int) -> npt.NDArray[np.float32]:
    """Zeroed float32 rows in memory mapped for them alone, given back to the system as
    soon as they are let go.

    From malloc, a matrix freed once its owner is let go could leave a hole in the heap:
    glibc raises its mmap threshold to the size of any mapped block freed, so after the
    first, owners' matrices (a megabyte at 1,000 memories) came from the heap, and a cache
    kept at its budget by 8 threads serving 300 owners grew its process past base +
    budget, and kept growing (docs/benchmarks.md, issue 32 item 7). Fixing the threshold
    at its default instead mapped every block of 128 KiB or more, a recall's passing
    arrays too, each page faulted in anew on every use: a recall of six common words at
    100,000 memories took a quarter longer. Like numpy, large rows ask the kernel for
    huge pages (fewer misses when a recall reads rows here and there)."""
    size = max(count * dimension * 4, 1)
    memory = mmap.mmap(-1, size)
    if size >= _HUGE_PAGE_FROM and hasattr(mmap, "MADV_HUGEPAGE"):
        memory.madvise(mmap.MADV_HUGEPAGE)
    return np.frombuffer(memory, dtype=np.float32, count=count * dimension).reshape(
        count, dimension
    )


# numpy's own threshold for asking for huge pages.
_HUGE_PAGE_FROM = 4 * 1024 * 1024
