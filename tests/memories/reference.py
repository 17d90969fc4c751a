"""The ranking oracle: SPEC §3, §3.1 and §3.2 computed the slow way, from plain values.

It reads nothing the recall index keeps: it tokenises every live memory of the owner,
counts N and the document frequencies itself, and applies memories.recall.ranking's formula.
tests/memories/test_relevance_reference.py holds recall through the database to it.
"""

import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from memories.recall.ranking import (
    DEFAULT_ACTIVATION,
    ActivationConfig,
    Candidate,
    IndexedTerms,
    Profile,
    Ranked,
    Relevance,
    index_entries,
    memory_terms,
    parse_query,
    query_weights,
    rank,
)


@dataclass(frozen=True)
class MemoryValues:
    """One memory as plain values: all the reference needs."""

    id: uuid.UUID
    gist: str
    content: str
    tags: Sequence[str]
    search_keywords: Sequence[str]
    salience: str
    retrieval_count: int
    last_retrieved: datetime | None
    created_at: datetime
    updated_at: datetime


def reference_rank(
    live_memories: Sequence[MemoryValues],
    query_text: str | None,
    *,
    profile: Profile,
    now: datetime,
    config: ActivationConfig = DEFAULT_ACTIVATION,
    among: Callable[[MemoryValues], bool] = lambda memory: True,
    limit: int = 50,
    cosine: Callable[[MemoryValues], int | None] | None = None,
) -> list[Ranked]:
    """Tokenise every live memory of the owner, count N and df, weigh the query and rank
    the memories `among` admits (the filters); the best `limit`.

    `cosine` (a memory's cosine with the query in thousandths, None without a vector)
    blends in meaning: every lexical match's relevance takes it in (a match without a
    vector counts 0); of the memories that share no word and whose cosine reaches the
    floor, the `dense_candidates` nearest compete with the matches, and the next nearest
    fill the places the matches leave, best cosine first.
    """
    query = parse_query(query_text, profile)
    if query.only_stop_words:
        return []
    terms = {
        m.id: memory_terms(
            gist=m.gist,
            content=m.content,
            tags=m.tags,
            search_keywords=m.search_keywords,
            profile=profile,
        )
        for m in live_memories
    }
    df: Counter[str] = Counter()
    for memory_terms_ in terms.values():
        df.update(index_entries(memory_terms_).keys())
    keyword_factor, content_factor = profile.factors(config)
    scorer = Relevance(
        query_weights(query, profile=profile, live=len(live_memories), df=df, config=config),
        keyword_factor,
        content_factor,
    )
    admitted = [m for m in live_memories if among(m)]
    hits = {m.id: relevance_hits(scorer, _keyed(terms[m.id])) for m in admitted}
    blend = cosine is not None and not query.blank

    def candidate(m: MemoryValues, cosine_milli: int | None) -> Candidate:
        return Candidate(
            id=m.id,
            salience=m.salience,
            retrieval_count=m.retrieval_count,
            last_retrieved=m.last_retrieved,
            created_at=m.created_at,
            updated_at=m.updated_at,
            hits=hits[m.id],
            cosine=cosine_milli,
        )

    if not blend:
        denominator = None if query.blank else scorer.denominator
        ranked = rank(
            [candidate(m, None) for m in admitted], denominator=denominator, now=now, config=config
        )
        return ranked[:limit]
    assert cosine is not None
    matches = [candidate(m, cosine(m) or 0) for m in admitted if hits[m.id] > 0]
    alone: list[tuple[int, str, MemoryValues]] = []
    for m in admitted:
        if hits[m.id] == 0 and (c := cosine(m)) is not None and c >= config.meaning_floor:
            alone.append((-c, str(m.id), m))
    alone.sort()
    places = max(config.dense_candidates, limit - len(matches))
    fill = [candidate(m, -c) for c, _, m in alone[: max(0, places)]]
    return rank(matches + fill, denominator=scorer.denominator, now=now, config=config)[:limit]


def relevance_hits(relevance: Relevance, terms: IndexedTerms) -> int:
    """Σ w(t) × f(t, m) over the query's tokens: what the database counts for a memory."""
    total = 0
    for token, weight in relevance.weights.items():
        if token in terms.keywords:
            total += weight * relevance.keyword_factor
        elif token in terms.content_only:
            total += weight * relevance.content_factor
    return total


def _keyed(terms: IndexedTerms) -> IndexedTerms:
    """The terms as index keys (long tokens shortened), as query tokens are."""
    entries = index_entries(terms)
    return IndexedTerms(
        frozenset(k for k, kw in entries.items() if kw),
        frozenset(k for k, kw in entries.items() if not kw),
    )
