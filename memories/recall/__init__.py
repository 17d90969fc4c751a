"""Recall: the index beside the memory rows (indexing), how text becomes tokens (tokens,
pure), how a query and a memory become index entries and how candidates are ranked
(ranking, pure), what a recall reads of the index as a whole (owner_index), the ranking
in SQL (scoring and impact, their statements built with sql), the postings a worker holds
(postings), and recall by meaning (embedding, onnx_embedding, semantic, vector_cache).

This package is recall's one face: the interfaces (the tools, the dashboard, OAuth, the
admin, the management commands, the bench, taproot_site) import these names from
`memories.recall` and no module inside it. Recall builds on the models and memories'
shared modules; it imports nothing of memories.services or memories.portability, which
build on it (tests/memories/test_services.py holds these walls). Each name is imported on first use
(`__getattr__`), from the module that defines it: the pure modules (tokens, ranking,
embedding, semantic) load without Django, as the bench's children and a process that only ranks
need, and the index loads the models only when one of its names is asked for.
"""

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memories.recall.embedding import EmbedderUnavailable, embedder_named
    from memories.recall.indexing import (
        REBUILD_BATCH,
        Vectors,
        embedder_problem,
        embedding_text,
        index_mismatch,
        rebuild,
        recall_entry,
        refresh_hashes,
        tag_keys,
        token_entries,
        vectors_for,
    )
    from memories.recall.owner_index import statistics
    from memories.recall.postings import POSTINGS
    from memories.recall.ranking import (
        DEFAULT_PROFILE,
        TAPROOT,
        ActivationConfig,
        index_entries,
        index_key,
        memory_terms,
        parse_query,
    )
    from memories.recall.semantic import (
        OwnerVectors,
        QueryVector,
        cosines,
        id_halves,
        memory_text,
        query_stored,
        query_text,
        stored,
    )
    from memories.recall.tokens import STOP_WORDS, snowball_stem, stem, words
    from memories.recall.vector_cache import VectorCache
    from memories.recall.warming import warm_recent_owners

__all__ = [
    "DEFAULT_PROFILE",
    "POSTINGS",
    "REBUILD_BATCH",
    "STOP_WORDS",
    "TAPROOT",
    "ActivationConfig",
    "EmbedderUnavailable",
    "OwnerVectors",
    "QueryVector",
    "VectorCache",
    "Vectors",
    "cosines",
    "embedder_named",
    "embedder_problem",
    "embedding_text",
    "id_halves",
    "index_entries",
    "index_key",
    "index_mismatch",
    "memory_terms",
    "memory_text",
    "parse_query",
    "query_stored",
    "query_text",
    "rebuild",
    "recall_entry",
    "refresh_hashes",
    "snowball_stem",
    "statistics",
    "stem",
    "stored",
    "tag_keys",
    "token_entries",
    "vectors_for",
    "warm_recent_owners",
    "words",
]

# The module each name comes from.
_HOMES = {
    "ActivationConfig": "ranking",
    "DEFAULT_PROFILE": "ranking",
    "EmbedderUnavailable": "embedding",
    "OwnerVectors": "semantic",
    "POSTINGS": "postings",
    "QueryVector": "semantic",
    "REBUILD_BATCH": "indexing",
    "VectorCache": "vector_cache",
    "STOP_WORDS": "tokens",
    "TAPROOT": "ranking",
    "Vectors": "indexing",
    "cosines": "semantic",
    "embedder_named": "embedding",
    "embedder_problem": "indexing",
    "embedding_text": "indexing",
    "id_halves": "semantic",
    "index_entries": "ranking",
    "index_key": "ranking",
    "index_mismatch": "indexing",
    "memory_terms": "ranking",
    "memory_text": "semantic",
    "parse_query": "ranking",
    "query_stored": "semantic",
    "query_text": "semantic",
    "rebuild": "indexing",
    "recall_entry": "indexing",
    "refresh_hashes": "indexing",
    "snowball_stem": "tokens",
    "statistics": "owner_index",
    "stem": "tokens",
    "stored": "semantic",
    "tag_keys": "indexing",
    "token_entries": "indexing",
    "vectors_for": "indexing",
    "warm_recent_owners": "warming",
    "words": "tokens",
}


def __getattr__(name: str) -> object:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)
