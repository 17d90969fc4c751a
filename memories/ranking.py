"""Recall ranking (activation) as pure functions: no ORM, no settings.

score = base_weight × base + salience_weight × salience + relevance_weight × relevance

The weights live in one frozen config object; `memories.conf.activation_config()`
applies overrides from settings.
"""

import hashlib
import math
import re
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from fractions import Fraction
from functools import lru_cache

from memories.timeutil import micros
from memories.vocabulary import HIGH, LOW, MEDIUM

TOKEN_RE = re.compile(r"[a-z0-9']+")
SECONDS_PER_DAY = 86_400.0
# Longest token kept verbatim in the database index; longer ones are stored as a
# prefix plus a digest so the index column stays small on both backends.
MAX_INDEX_KEY = 64


@dataclass(frozen=True)
class ActivationConfig:
    base_weight: float = 1.0
    salience_weight: float = 1.0
    relevance_weight: float = 2.5
    novelty_floor: float = 0.6
    decay_exponent: float = -0.5
    keyword_hit: float = 1.0
    content_hit: float = 0.35
    salience_scores: dict[str, float] = field(
        default_factory=lambda: {HIGH: 1.0, MEDIUM: 0.6, LOW: 0.3}
    )


DEFAULT_ACTIVATION = ActivationConfig()


def stem(token: str) -> str:
    """The small suffix stemmer: the first rule that applies wins."""
    n = len(token)
    if n > 6 and token.endswith("ing"):
        return token[:-3]
    if n > 5 and token.endswith("ed"):
        return token[:-2]
    if n > 5 and token.endswith("es"):
        return token[:-2]
    if n > 4 and token.endswith("s") and not token.endswith("ss"):
        return token[:-1]
    return token


def tokenize(text: str | None) -> list[str]:
    """Lowercased runs of [a-z0-9'], each stemmed. Anything else separates tokens."""
    if not text:
        return []
    return [stem(raw) for raw in TOKEN_RE.findall(text.lower())]


def token_set(texts: Iterable[str | None]) -> set[str]:
    tokens: set[str] = set()
    for text in texts:
        tokens.update(tokenize(text))
    return tokens


def index_key(value: str) -> str:
    """How a token (or tag) is stored in the index: itself, or prefix + digest if long."""
    if len(value) <= MAX_INDEX_KEY:
        return value
    digest = hashlib.sha256(value.encode()).hexdigest()[:15]
    return f"{value[: MAX_INDEX_KEY - 16]}#{digest}"


@dataclass(frozen=True)
class IndexedTerms:
    """The distinct tokens of one memory, split by where they occur."""

    keywords: frozenset[str]  # tokens of search_keywords, tags and gist
    content_only: frozenset[str]  # tokens found only in content


def memory_terms(
    *, gist: str | None, content: str | None, tags: Iterable[str], search_keywords: Iterable[str]
) -> IndexedTerms:
    keywords = token_set([gist, *tags, *search_keywords])
    content_only = token_set([content]) - keywords
    return IndexedTerms(frozenset(keywords), frozenset(content_only))


def relevance(
    *,
    query_size: int,
    keyword_hits: int,
    content_hits: int,
    config: ActivationConfig = DEFAULT_ACTIVATION,
) -> float:
    """(k × keyword_hit + c × content_hit) / |Q|, from integer counts so equal inputs tie."""
    if query_size <= 0:
        return 0.0
    return _exact_relevance(
        query_size, keyword_hits, content_hits, config.keyword_hit, config.content_hit
    )


@lru_cache(maxsize=4096)
def _exact_relevance(
    query_size: int, keyword_hits: int, content_hits: int, keyword_hit: float, content_hit: float
) -> float:
    # Exact rational arithmetic rounded once: equal fractions give bit-identical floats,
    # so ties really tie.
    value = (
        keyword_hits * Fraction(str(keyword_hit)) + content_hits * Fraction(str(content_hit))
    ) / query_size
    return float(value)


def base_activation(
    *,
    retrieval_count: int,
    last_retrieved: datetime | None,
    created_at: datetime,
    now: datetime,
    config: ActivationConfig = DEFAULT_ACTIVATION,
) -> float:
    if retrieval_count <= 0:
        return config.novelty_floor
    since = last_retrieved or created_at
    days = max((now - since).total_seconds() / SECONDS_PER_DAY, 0.0)
    return math.log(retrieval_count + 1) * math.pow(days + 1, config.decay_exponent)


def activation(
    *,
    retrieval_count: int,
    last_retrieved: datetime | None,
    created_at: datetime,
    salience: str,
    now: datetime,
    relevance_value: float | None,
    config: ActivationConfig = DEFAULT_ACTIVATION,
) -> float:
    """The full score; `relevance_value` is None when the query is blank."""
    score = config.base_weight * base_activation(
        retrieval_count=retrieval_count,
        last_retrieved=last_retrieved,
        created_at=created_at,
        now=now,
        config=config,
    )
    score += config.salience_weight * config.salience_scores.get(
        salience, config.salience_scores[MEDIUM]
    )
    if relevance_value is not None:
        score += config.relevance_weight * relevance_value
    return score


@dataclass(frozen=True)
class Candidate:
    """What ranking needs to know about one memory."""

    id: uuid.UUID
    salience: str
    retrieval_count: int
    last_retrieved: datetime | None
    created_at: datetime
    updated_at: datetime
    keyword_hits: int = 0
    content_hits: int = 0


@dataclass(frozen=True)
class Ranked:
    candidate: Candidate
    score: float


def rank(
    candidates: Iterable[Candidate],
    *,
    query_tokens: set[str] | frozenset[str],
    now: datetime,
    config: ActivationConfig = DEFAULT_ACTIVATION,
) -> list[Ranked]:
    """Score and order candidates. With query tokens, those without relevance are dropped.

    Ties (exactly equal scores) go to the newer `updated_at`, then the smaller id.
    """
    query_size = len(query_tokens)
    ranked: list[Ranked] = []
    for candidate in candidates:
        relevance_value: float | None = None
        if query_size:
            if candidate.keyword_hits + candidate.content_hits == 0:
                continue
            relevance_value = relevance(
                query_size=query_size,
                keyword_hits=candidate.keyword_hits,
                content_hits=candidate.content_hits,
                config=config,
            )
        score = activation(
            retrieval_count=candidate.retrieval_count,
            last_retrieved=candidate.last_retrieved,
            created_at=candidate.created_at,
            salience=candidate.salience,
            now=now,
            relevance_value=relevance_value,
            config=config,
        )
        ranked.append(Ranked(candidate, score))
    ranked.sort(key=_order_key)
    return ranked


def _order_key(item: Ranked) -> tuple[float, int, str]:
    return (-item.score, -micros(item.candidate.updated_at), str(item.candidate.id))
