from typing import Any


def embedded_cosine(query: str, memory: Any) -> int | None:
    """A memory's cosine with the query as SPEC §3.2 defines it, from vectors embedded here
    from the memory's text (never read from the store); None without an embedder."""
    from memories.conf import embedder
    from memories.recall.semantic import cosines, memory_text, stored

    semantic = embedder()
    query_vector = semantic.embed_query(query) if semantic is not None else None
    if semantic is None or query_vector is None:
        return None
    text = memory_text(
        gist=memory.gist, content=memory.content, tags=memory.tags, keywords=memory.search_keywords
    )
    vector = semantic.embed([text])[0]
    return cosines(query_vector, [stored(vector) if vector is not None else None])[0]


def forget_sqlite_statistics() -> None:
    """Drop SQLite's planner statistics, stored and loaded (they outlive a rolled-back
    test transaction in the connection), so queries plan as on a never-analysed store."""
    from django.db import connection

    if connection.vendor != "sqlite":
        return
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM sqlite_master WHERE name = 'sqlite_stat1'")
        if cursor.fetchone():
            cursor.execute("DELETE FROM sqlite_stat1")
            cursor.execute("ANALYZE sqlite_master")
