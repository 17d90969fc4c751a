"""Each worker's cache of its owners' vectors (memories.recall.semantic.OwnerVectors), kept
up to date by the index's version and within a budget, and the worker's malloc set up for
it."""

import ctypes
import threading
import uuid
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from memories.recall.embedding import Embedder, Vector
from memories.recall.semantic import OwnerVectors, cosines

if TYPE_CHECKING:
    from memories.recall.owner_index import OwnerIndex


class VectorCache:
    """Each owner's vectors, kept per worker process and brought up to date by version:
    a write to an owner's index moves RecallIndex.version and stamps the vectors it
    writes with it, so a cache reads only the vectors newer than what it holds.

    The database is read under no lock another owner's recall waits on: one owner's
    first recall (seconds at 100,000 memories) keeps no other owner waiting, and each
    owner's rows have a lock of their own. The owner's other recalls meanwhile wait for
    that load rather than read every row again. The owners held share a budget
    (TAPROOT_VECTOR_CACHE_MB); past it, the owners least recently used are let go, and
    read again whole at their next recall."""

    def __init__(self, budget: int | None = None) -> None:
        self._owners: OrderedDict[int, OwnerVectors] = OrderedDict()
        # Held only to look owners up, add them and let them go: never across a read.
        self._table = threading.Lock()
        # A latch per owner being loaded whole, held across its read (by that owner's
        # recalls only).
        self._loading: dict[int, threading.Lock] = {}
        self._budget = budget

    @property
    def budget(self) -> int:
        """Bytes the owners held may take together (TAPROOT_VECTOR_CACHE_MB unless given)."""
        if self._budget is not None:
            return self._budget
        from django.conf import settings

        return int(settings.TAPROOT_VECTOR_CACHE_MB) * 1024 * 1024

    def held_bytes(self) -> int:
        with self._table:
            return sum(held.nbytes for held in self._owners.values())

    def holds(self, owner_id: int) -> bool:
        with self._table:
            return owner_id in self._owners

    def nearest(
        self,
        owner_id: int,
        query: Vector,
        *,
        embedder: Embedder,
        index: "OwnerIndex",
        floor_milli: int,
        limit: int,
        exclude: set[uuid.UUID],
    ) -> list[tuple[uuid.UUID, int]]:
        """The owner's memories nearest the query by exact cosine (see OwnerVectors)."""
        held = self._refreshed(owner_id, embedder, index)
        with held.lock:
            return held.nearest(query, floor_milli=floor_milli, limit=limit, exclude=exclude)

    def cosines(
        self,
        owner_id: int,
        query: Vector,
        keys: Sequence[int],
        *,
        embedder: Embedder,
        index: "OwnerIndex",
    ) -> list[int | None]:
        """Exact cosines (thousandths) of the query with each of these memories (keys: ids
        as integers), None where a memory has no vector. The cache answers for what it
        holds as of the index's version; a memory written since (not held yet) is read
        from the database."""
        from memories.models import MemoryVector

        held = self._refreshed(owner_id, embedder, index)
        with held.lock:
            found = held.cosines_of(query, keys)
        missing = [uuid.UUID(int=k) for k in keys if k not in found]
        if missing:
            rows = MemoryVector.objects.filter(
                owner_id=owner_id, embedder=embedder.name, memory_id__in=missing
            ).values_list("memory_id", "vector")
            stored = {memory_id.int: bytes(data) for memory_id, data in rows}
            exact = cosines(query, [stored.get(i.int) for i in missing])
            found.update(zip((i.int for i in missing), exact, strict=True))
        return [found[k] for k in keys]

    def ceiling(
        self,
        owner_id: int,
        query: Vector,
        *,
        embedder: Embedder,
        index: "OwnerIndex",
        keys: npt.NDArray[np.uint64] | None = None,
    ) -> int:
        """A cosine (thousandths) that none of the owner's memories exceeds with the query,
        or none of these (keys: ids as halves, `id_halves`), as of the index's version."""
        held = self._refreshed(owner_id, embedder, index)
        with held.lock:
            return held.ceiling(query, keys)

    def _refreshed(self, owner_id: int, embedder: Embedder, index: "OwnerIndex") -> OwnerVectors:
        """The owner's vectors brought up to the index's version.

        Two recalls of one owner may read the same new rows at once; the rows are applied
        only by a read for a later version than the one held, so a slower, older read
        never overwrites a newer one (a row read with newer data than its version says is
        read again once the held version passes it).

        A load of the whole owner waits for one of that owner already under way (a latch
        of the owner's, no other owner's): recalls of an owner arriving at once would each
        read every row, a worker's memory growing by the rows read over again."""
        held = self._held(owner_id, embedder, index)
        if held is not None and held.version >= index.version:
            return held
        if held is not None:
            return self._loaded(owner_id, embedder, index, held)
        with self._table:
            latch = self._loading.setdefault(owner_id, threading.Lock())
        try:
            with latch:
                held = self._held(owner_id, embedder, index)
                if held is not None and held.version >= index.version:
                    return held
                return self._loaded(owner_id, embedder, index, held)
        finally:
            with self._table:
                if self._loading.get(owner_id) is latch:
                    del self._loading[owner_id]

    def _held(self, owner_id: int, embedder: Embedder, index: "OwnerIndex") -> OwnerVectors | None:
        """The owner's vectors held, if they are of this store (maybe of an older version)."""
        with self._table:
            held = self._owners.get(owner_id)
            if held is not None:
                self._owners.move_to_end(owner_id)
        if held is None:
            return None
        # Vectors of deleted memories stay until a reload; reload when they pile up.
        # Another generation (a store rebuilt or restored): the cache is of another store.
        if (
            held.embedder != embedder.name
            or held.generation != index.generation
            or len(held.ids) > 1.25 * index.live + 100
        ):
            return None
        # A version older than the one held is, nearly always, a recall that read the index
        # before a write which another recall in this worker has taken in since: the newer
        # vectors serve it, as they would a moment later. Reading the owner whole again for
        # it cost seconds at 100,000 memories, and under writes it happened again and
        # again. Only when the stored version went back too was the database restored
        # under the server, keeping its generation: then the cache is of another store.
        if held.version > index.version and _stored_version(owner_id) < held.version:
            with self._table:  # let them go, or the newer version would be kept over the load
                if self._owners.get(owner_id) is held:
                    del self._owners[owner_id]
            return None
        return held

    def _loaded(
        self,
        owner_id: int,
        embedder: Embedder,
        index: "OwnerIndex",
        held: OwnerVectors | None,
    ) -> OwnerVectors:
        """`held` (None: the owner whole) brought up to the index's version from the
        database, read under no lock, and kept."""
        if held is None:
            # Read whole, each chunk of rows taken in as it comes, into room for every live
            # memory: the rows read never pile up beside the matrix (at 100,000 memories
            # they would add about 100 MB to the worker's peak). No other recall sees these
            # vectors before they are kept, so none waits on the read.
            rows: Iterable[tuple[uuid.UUID, bytes]] = _rows_since(owner_id, embedder, -1)
            held = OwnerVectors(
                embedder.name, embedder.dimension, index.generation, rows=index.live
            )
        else:
            rows = list(_rows_since(owner_id, embedder, held.version))
        with held.lock:
            if held.version < index.version:
                held.apply(rows)
                held.version = index.version
        self._keep(owner_id, held)
        return held

    def _keep(self, owner_id: int, held: OwnerVectors) -> None:
        """Hold the owner's vectors (the newest of two loaded at once) and let the least
        recently used other owners go while all of them pass the budget. An owner alone
        past the budget is used, not kept."""
        budget = self.budget
        with self._table:
            current = self._owners.get(owner_id)
            if current is not held and (
                current is None
                or current.generation != held.generation
                or current.embedder != held.embedder
                or current.version <= held.version
            ):
                self._owners[owner_id] = held
            self._owners.move_to_end(owner_id)
            total = sum(kept.nbytes for kept in self._owners.values())
            for other in list(self._owners):
                if total <= budget:
                    break
                total -= self._owners.pop(other).nbytes

    def clear(self) -> None:
        with self._table:
            self._owners.clear()


def _stored_version(owner_id: int) -> int:
    """The owner's index version as stored now (-1: the owner has no index)."""
    from memories.models import RecallIndex

    version = (
        RecallIndex.objects.filter(owner_id=owner_id).values_list("version", flat=True).first()
    )
    return -1 if version is None else version


def _rows_since(
    owner_id: int, embedder: Embedder, version: int
) -> Iterator[tuple[uuid.UUID, bytes]]:
    """The owner's vectors stamped after `version` (bytes empty: the memory has none now),
    oldest first, read a chunk at a time as they are taken."""
    from memories.models import MemoryVector

    rows = MemoryVector.objects.filter(
        owner_id=owner_id, embedder=embedder.name, version__gt=version
    ).order_by("version", "memory_id")
    for memory_id, data in rows.values_list("memory_id", "vector").iterator(chunk_size=2000):
        yield memory_id, bytes(data)


# glibc's mallopt parameter for the number of heaps.
_M_ARENA_MAX = -8
ARENA_MAX = 2


def keep_heaps_few() -> bool:
    """Let glibc's malloc keep two heaps for all the threads of a worker (once per process;
    False where the C library is not glibc). Left as it is, each thread of a worker's pool
    may allocate in a heap of its own, up to 8 per core, each holding on to what its
    thread freed (docs/benchmarks.md, issue 32 item 7)."""
    try:
        libc = ctypes.CDLL(None)
        mallopt = libc.mallopt
        libc.gnu_get_libc_version  # noqa: B018 (glibc only)
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    return bool(mallopt(_M_ARENA_MAX, ARENA_MAX))


keep_heaps_few()
CACHE = VectorCache()
