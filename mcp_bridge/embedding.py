"""Where a /mcp request's embedding runs: on threads of its own, never the database's.

Embedding is the costliest thing a tool call does (tens of milliseconds for a long memory
with MiniLM, more before memories.recall.semantic.EMBEDDED_CHARS bounded it), and the database
threads are few (mcp_bridge.database): a user sending several long remembers at once held
them all while a model computed, and every other user's recall queued behind. So a call
whose text can be known from its arguments is embedded first, here, and handed to the
service, which then only reads and writes:

- `taproot_remember` creating a memory: the memory's text (memories.recall.indexing.Vectors);
- `taproot_recall` with a query: the query's vector (memories.recall.semantic.QueryVector).

Queries and memories have a thread each, so a recall never waits behind a flood of
remembers; one thread each bounds the cores embedding may take from everything else
(the model computes on one anyway). A service given vectors for other text (an update's,
which depends on the stored memory, or a draft the service refuses) embeds what it needs
itself, as it does for the dashboard and the commands.
"""

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from mcp_bridge import trips
from memories.conf import embedder
from memories.recall import QueryVector, query_text

if TYPE_CHECKING:  # the models load after the ASGI application that imports this module
    from memories.models import Memory
    from memories.recall import Vectors


class _Lane:
    """One thread, made on first use, for one kind of embedding."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._executor: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    def executor(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(1, thread_name_prefix=self.name)
            return self._executor

    async def run[**P, R](
        self, function: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs
    ) -> R:
        return await trips.on_thread(self.executor(), function, *args, **kwargs)

    def shutdown(self) -> None:
        with self._lock:
            if self._executor is not None:
                self._executor.shutdown(wait=True)
                self._executor = None


MEMORIES = _Lane("taproot-embed-memory")
QUERIES = _Lane("taproot-embed-query")


async def memory_vectors(memories: list["Memory"]) -> "Vectors | None":
    """The vectors of these unsaved memories' texts; None without an embedder."""
    from memories.recall import vectors_for

    if not memories or embedder() is None:
        return None
    return await MEMORIES.run(vectors_for, memories)


async def query_vector(query: str) -> QueryVector | None:
    """The vector of a recall's query; None without an embedder or without a query."""
    semantic = embedder()
    if semantic is None or not query.strip():
        return None
    text = query_text(query)
    vector = await QUERIES.run(semantic.embed_query, text)
    return QueryVector(semantic.name, text, vector)


def shutdown() -> None:
    """Stop the embedding threads (when the server stops)."""
    MEMORIES.shutdown()
    QUERIES.shutdown()
