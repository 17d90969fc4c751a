"""What the vector cache's budget counts, and that an owner let go gives its memory back
(issue 32: a worker's RSS within its budget + 250 MB however many owners it serves)."""

import gc
import platform
import subprocess
import sys
import textwrap
import tracemalloc
import uuid

import numpy as np
import pytest

from memories.recall.embedding import to_bytes
from memories.recall.semantic import OwnerVectors


def _rows(count: int) -> list[tuple[uuid.UUID, bytes]]:
    rng = np.random.default_rng(7)
    rows = []
    for n in range(count):
        vector = rng.standard_normal(256).astype(np.float32)
        rows.append((uuid.UUID(int=(1 << 100) + n), to_bytes(vector / np.linalg.norm(vector))))
    return rows


@pytest.mark.parametrize("count", [1000, 10_000])
def test_an_owners_accounted_size_is_what_its_vectors_and_ids_truly_take(count: int) -> None:
    rows = _rows(count)
    gc.collect()
    tracemalloc.start()
    try:
        # The ids as a database read makes them: objects of this owner's own.
        read = [(uuid.UUID(bytes=memory_id.bytes), data) for memory_id, data in rows]
        held = OwnerVectors("wordllama", 256, None, rows=count)
        held.apply(read)
        del read
        gc.collect()
        taken = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    # Counted a little over (never under) what the matrix, the ids, the lookup and the
    # list truly take.
    assert taken <= held.nbytes <= 1.15 * taken


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's malloc only")
def test_a_freed_matrix_does_not_move_later_ones_onto_the_heap() -> None:
    """glibc left alone raises its mmap threshold to the size of a mapped block freed, so
    the next owner's matrix would come from the heap; the cache's module keeps it fixed."""
    script = textwrap.dedent(
        """
        import ctypes
        import numpy as np
        import memories.recall.semantic

        class Info(ctypes.Structure):
            _fields_ = [(name, ctypes.c_size_t) for name in (
                "arena", "ordblks", "smblks", "hblks", "hblkhd",
                "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]

        libc = ctypes.CDLL(None)
        libc.mallinfo2.restype = Info
        first = np.ones((1000, 256), dtype=np.float32)  # an owner's matrix, 1 MB
        del first  # the owner let go
        mapped = libc.mallinfo2().hblkhd
        second = np.ones((1000, 256), dtype=np.float32)
        print(libc.mallinfo2().hblkhd - mapped >= second.nbytes)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.strip() == "True"
