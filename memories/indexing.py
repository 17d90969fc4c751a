"""Write-time bookkeeping that recall and the duplicate warning read: the token index,
tag rows and normalised hashes. Every write path that changes gist, content, tags or
keywords calls `reindex`."""

import hashlib
import re
from collections.abc import Iterable

from memories.models import Memory, MemoryTag, MemoryToken
from memories.ranking import index_key, memory_terms, tokenize

_NOT_WORD = re.compile(r"[\W_]+")


def normalised_hash(text: str | None) -> str:
    """Hash of the text case-folded with whitespace and punctuation collapsed."""
    folded = _NOT_WORD.sub(" ", (text or "").casefold()).strip()
    if not folded:
        return ""
    return hashlib.sha256(folded.encode()).hexdigest()


def tag_key(tag: str) -> str:
    return index_key(tag.strip().casefold())


def query_keys(query: str | None) -> list[str]:
    """The distinct index keys of a query's tokens (empty for a blank query)."""
    return sorted({index_key(token) for token in tokenize(query)})


def refresh_hashes(memory: Memory) -> None:
    memory.gist_hash = normalised_hash(memory.gist)
    memory.content_hash = normalised_hash(memory.content)


def _rows_for(memory: Memory) -> tuple[list[MemoryToken], list[MemoryTag]]:
    terms = memory_terms(
        gist=memory.gist,
        content=memory.content,
        tags=string_items(memory.tags),
        search_keywords=string_items(memory.search_keywords),
    )
    keys: dict[str, bool] = {}
    for token in terms.keywords:
        keys[index_key(token)] = True
    for token in terms.content_only:
        keys.setdefault(index_key(token), False)
    tokens = [
        MemoryToken(memory_id=memory.pk, owner_id=memory.owner_id, key=key, in_keywords=kw)
        for key, kw in keys.items()
    ]
    tag_keys = {tag_key(tag) for tag in string_items(memory.tags) if tag.strip()}
    tags = [MemoryTag(memory_id=memory.pk, owner_id=memory.owner_id, key=key) for key in tag_keys]
    return tokens, tags


def string_items(values: object) -> list[str]:
    # Drifted records may hold a bare string or mixed items until migrate repairs them.
    if isinstance(values, str):
        return [values]
    if isinstance(values, list):
        return [v for v in values if isinstance(v, str)]
    return []


def reindex(memories: Iterable[Memory]) -> None:
    """Rebuild the token and tag rows of these (saved) memories."""
    batch = list(memories)
    if not batch:
        return
    ids = [m.pk for m in batch]
    MemoryToken.objects.filter(memory_id__in=ids).delete()
    MemoryTag.objects.filter(memory_id__in=ids).delete()
    tokens: list[MemoryToken] = []
    tags: list[MemoryTag] = []
    for memory in batch:
        memory_tokens, memory_tags = _rows_for(memory)
        tokens.extend(memory_tokens)
        tags.extend(memory_tags)
    MemoryToken.objects.bulk_create(tokens, batch_size=2000)
    MemoryTag.objects.bulk_create(tags, batch_size=2000)
