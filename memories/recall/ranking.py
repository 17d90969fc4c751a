"""Recall ranking (activation, SPEC §3) as pure functions: no ORM, no settings.

score = history + salience_weight × salience + relevance_weight × relevance

History is what a memory's recalls add. The `taproot` profile bounds it: at most
history_weight, which is worth a twenty-fifth of the query's weight, so history
orders memories that match about equally and never outranks a clearly better match. The
`seed` profile keeps the original, unbounded base activation (base_weight × base).

Relevance has two profiles (SPEC §3.1): `taproot`, the default, weighs each query word by
how rare it is among the owner's live memories (IDF); `seed` is the original rule, every
word alike. Both share the shape the database path computes: per memory an integer
numerator Σ w(t) × f(t, m) over the query's tokens t, divided by an integer denominator,
so equal inputs tie exactly.

These functions are the reference formula: the database path (memories.recall.scoring, then
memories.services.recall) computes the same terms in the same order, and the tests hold
it to a whole store ranked from scratch with them (tests/memories/reference.py). The
weights live in one frozen config object; `memories.conf.activation_config()` applies
overrides from settings.
"""

import dataclasses
import hashlib
import math
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from fractions import Fraction
from functools import lru_cache

from memories.recall.tokens import taproot_tokenize, tokenize, words
from memories.timeutil import micros
from memories.vocabulary import HIGH, LOW, MEDIUM

SECONDS_PER_DAY = 86_400.0
# Longest token kept verbatim in the database index; longer ones are stored as a
# prefix plus a digest so the index column stays small on both backends.
MAX_INDEX_KEY = 64


@dataclass(frozen=True)
class Meaning:
    """How one embedder's cosines enter recall (SPEC §3.2, issue 25), chosen for that
    embedder on the LoCoMo development split (docs/benchmarks.md): a lexical match's
    relevance is lexical_share × its lexical relevance + semantic_share × its cosine; the
    `dense_candidates` memories nearest the query that share no word with it compete too,
    and when fewer memories match than asked for, the places left go to the next nearest;
    either way only those whose cosine (thousandths) reaches `meaning_floor`, with
    relevance semantic_share × cosine."""

    lexical_share: float
    semantic_share: float
    dense_candidates: int
    meaning_floor: int


# wordllama's cosines barely separate a paraphrase from unrelated text: meaning takes 30 %
# of a match's relevance and fills only places words leave empty, at a high floor.
WORDLLAMA_MEANING = Meaning(
    lexical_share=0.7, semantic_share=0.3, dense_candidates=0, meaning_floor=490
)
# all-MiniLM-L6-v2 tells paraphrases apart: half of relevance, and its 20 nearest compete.
# On LoCoMo's development split (bench.meaning_floor) 746 pairs of a question and a memory
# sharing no word with it reach 0.35, 3 of them holding evidence, while six of ten
# hand-written paraphrases do (tests/mcp/test_paraphrases.py): docs/benchmarks.md.
MINILM_MEANING = Meaning(
    lexical_share=0.5, semantic_share=0.5, dense_candidates=20, meaning_floor=350
)
# The default embedder's floor, which the tests of recall by meaning read.
MEANING_FLOOR = WORDLLAMA_MEANING.meaning_floor


# How retrieval history enters the score (ActivationConfig.history).
BOUNDED = "bounded"
SEED_HISTORY = "seed"
HISTORY_FORMS = (BOUNDED, SEED_HISTORY)


@dataclass(frozen=True)
class ActivationConfig:
    # "bounded" (the taproot profile): history = history_weight × a / (1 + a), where a is
    # a retrieved memory's recency-weighted count, ln(retrieval_count + 1) × (days + 1)
    # ^ decay_exponent, and a memory never retrieved has none. "seed": base_weight × the
    # seed's base activation, a for a retrieved memory and novelty_floor for one never
    # retrieved, unbounded.
    history: str = BOUNDED
    # 0.1 is what relevance_weight makes of a twenty-fifth of the query: history can
    # overturn only a smaller difference of relevance (chosen on the LoCoMo development
    # split, replayed as real use: docs/benchmarks.md).
    history_weight: float = 0.1
    base_weight: float = 1.0
    salience_weight: float = 1.0
    relevance_weight: float = 2.5
    novelty_floor: float = 0.6
    decay_exponent: float = -0.5
    salience_scores: dict[str, float] = field(
        default_factory=lambda: {HIGH: 1.0, MEDIUM: 0.6, LOW: 0.3}
    )
    # The seed profile: a query token among the keyword tokens counts 1.0, one found only
    # in the content 0.35.
    keyword_hit: float = 1.0
    content_hit: float = 0.35
    # The taproot profile (SPEC §3.1): f(t, m) is 10 for a keyword token, 7 for a
    # content-only one; w(t) = round(idf_scale × ln(1 + (N − df + idf_k) / (df + idf_k))).
    keyword_factor: int = 10
    content_factor: int = 7
    idf_scale: int = 1000
    idf_k: float = 0.5
    # Recall by meaning (SPEC §3.2): the active embedder's Meaning (with_meaning); these
    # defaults are the default embedder's.
    lexical_share: float = WORDLLAMA_MEANING.lexical_share
    semantic_share: float = WORDLLAMA_MEANING.semantic_share
    dense_candidates: int = WORDLLAMA_MEANING.dense_candidates
    meaning_floor: int = WORDLLAMA_MEANING.meaning_floor

    def __post_init__(self) -> None:
        if self.history not in HISTORY_FORMS:
            raise ValueError(
                f"The history form must be one of {', '.join(HISTORY_FORMS)} "
                f"(TAPROOT_ACTIVATION gives {self.history!r})."
            )

    def with_meaning(self, meaning: Meaning) -> "ActivationConfig":
        """These constants with an embedder's way of weighing meaning."""
        return dataclasses.replace(
            self,
            lexical_share=meaning.lexical_share,
            semantic_share=meaning.semantic_share,
            dense_candidates=meaning.dense_candidates,
            meaning_floor=meaning.meaning_floor,
        )


DEFAULT_ACTIVATION = ActivationConfig()
# The seed profile's constants: the original formula exactly.
SEED_ACTIVATION = ActivationConfig(history=SEED_HISTORY)


def semantic_shares(config: ActivationConfig) -> tuple[Fraction, Fraction]:
    return Fraction(str(config.lexical_share)), Fraction(str(config.semantic_share))


# --- profiles --------------------------------------------------------------------------


@dataclass(frozen=True)
class Profile:
    """How one relevance profile turns text into tokens and weighs a query's tokens."""

    name: str
    tokenize: Callable[[str | None], list[str]]
    # Weigh each query token by its IDF (taproot); otherwise every token weighs 1 (seed).
    idf: bool
    # The ranking constants, how history enters the score among them.
    activation: ActivationConfig = DEFAULT_ACTIVATION

    def factors(self, config: ActivationConfig) -> tuple[int, int]:
        """Integer f(t, m) for a keyword token and for a content-only token."""
        if self.idf:
            return config.keyword_factor, config.content_factor
        # The seed's 1.0 and 0.35, as integers over a common denominator (100 and 35).
        keyword, content = Fraction(str(config.keyword_hit)), Fraction(str(config.content_hit))
        scale = math.lcm(keyword.denominator, content.denominator)
        return int(keyword * scale), int(content * scale)


TAPROOT = Profile("taproot", taproot_tokenize, idf=True)
SEED = Profile("seed", tokenize, idf=False, activation=SEED_ACTIVATION)
PROFILES = {profile.name: profile for profile in (TAPROOT, SEED)}
DEFAULT_PROFILE = TAPROOT


@dataclass(frozen=True)
class Query:
    """What a recall query asks for under one profile."""

    tokens: tuple[str, ...]  # distinct index keys, sorted
    # True when the text had words but every one was a stop word: it matches nothing.
    only_stop_words: bool = False

    @property
    def blank(self) -> bool:
        return not self.tokens and not self.only_stop_words


def parse_query(text: str | None, profile: Profile) -> Query:
    keys = tuple(sorted({index_key(token) for token in profile.tokenize(text)}))
    if keys or profile is not TAPROOT:
        return Query(keys)
    return Query((), only_stop_words=bool(words(text)))


def token_set(texts: Iterable[str | None], profile: Profile = SEED) -> set[str]:
    tokens: set[str] = set()
    for text in texts:
        tokens.update(profile.tokenize(text))
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
    *,
    gist: str | None,
    content: str | None,
    tags: Iterable[str],
    search_keywords: Iterable[str],
    profile: Profile = SEED,
) -> IndexedTerms:
    keywords = token_set([gist, *tags, *search_keywords], profile)
    content_only = token_set([content], profile) - keywords
    return IndexedTerms(frozenset(keywords), frozenset(content_only))


def index_entries(terms: IndexedTerms) -> dict[str, bool]:
    """Index key → whether it is a keyword token, as the recall index stores them."""
    entries: dict[str, bool] = {}
    for token in terms.keywords:
        entries[index_key(token)] = True
    for token in terms.content_only:
        entries.setdefault(index_key(token), False)
    return entries


# --- relevance -------------------------------------------------------------------------


def idf_weight(*, live: int, df: int, config: ActivationConfig = DEFAULT_ACTIVATION) -> int:
    """w(t) = round(1000 × ln(1 + (N − df + 0.5) / (df + 0.5))), an integer."""
    k = config.idf_k
    return round(config.idf_scale * math.log(1 + (live - df + k) / (df + k)))


def query_weights(
    query: Query,
    *,
    profile: Profile,
    live: int,
    df: Mapping[str, int],
    config: ActivationConfig = DEFAULT_ACTIVATION,
) -> dict[str, int]:
    """w(t) for each query token: its IDF weight (taproot) or 1 (seed).

    When every weight rounds to 0 (words nearly every memory holds, in a large store),
    the share 0 / 0 means nothing: the words then weigh alike, as in the seed rule.
    """
    if not profile.idf:
        return dict.fromkeys(query.tokens, 1)
    weights = {t: idf_weight(live=live, df=df.get(t, 0), config=config) for t in query.tokens}
    if weights and not any(weights.values()):
        return dict.fromkeys(query.tokens, 1)
    return weights


@dataclass(frozen=True)
class Relevance:
    """relevance(m) = hits(m) / denominator, from integers so that equal shares tie; hits(m),
    Σ w(t) × f(t, m) over the query's tokens, is counted by the database
    (memories.recall.scoring)."""

    weights: Mapping[str, int]
    keyword_factor: int
    content_factor: int

    @property
    def denominator(self) -> int:
        return self.keyword_factor * sum(self.weights.values())


def relevance_value(
    hits: int,
    denominator: int,
    cosine: int | None = None,
    config: ActivationConfig = DEFAULT_ACTIVATION,
) -> float:
    """A memory's relevance, rounded once from exact fractions (equal inputs, equal floats).

    hits / denominator (the lexical relevance) when `cosine` is None; with a cosine (in
    thousandths) the blend of SPEC §3.2: 0.7 × lexical + 0.3 × cosine, or 0.3 × cosine
    for a memory that shares no word (hits 0).
    """
    if cosine is None:
        return _exact_share(hits, denominator) if denominator > 0 else 0.0
    return _blend(hits, denominator, cosine, config.lexical_share, config.semantic_share)


@lru_cache(maxsize=4096)
def _exact_share(hits: int, denominator: int) -> float:
    return float(Fraction(hits, denominator))


@lru_cache(maxsize=16384)
def _blend(hits: int, denominator: int, cosine: int, lexical: float, semantic: float) -> float:
    lexical_part = Fraction(hits, denominator) if hits > 0 else Fraction(0)
    return float(
        Fraction(str(lexical)) * lexical_part + Fraction(str(semantic)) * Fraction(cosine, 1000)
    )


def relevance(
    *,
    query_size: int,
    keyword_hits: int,
    content_hits: int,
    config: ActivationConfig = DEFAULT_ACTIVATION,
) -> float:
    """The seed rule: (k × 1.0 + c × 0.35) / |Q|, from integer counts so equal inputs tie."""
    keyword, content = SEED.factors(config)
    return relevance_value(keyword_hits * keyword + content_hits * content, keyword * query_size)


# --- activation ------------------------------------------------------------------------


def recency_weighted_count(
    *, retrieval_count: int, since: datetime, now: datetime, decay_exponent: float
) -> float:
    """ln(retrieval_count + 1) × (days + 1) ^ decay_exponent, days since `since` (at least 0)."""
    days = max((now - since).total_seconds() / SECONDS_PER_DAY, 0.0)
    return math.log(retrieval_count + 1) * math.pow(days + 1, decay_exponent)


def base_activation(
    *,
    retrieval_count: int,
    last_retrieved: datetime | None,
    created_at: datetime,
    now: datetime,
    config: ActivationConfig = SEED_ACTIVATION,
) -> float:
    """The seed's base activation: the novelty floor for a memory never retrieved, else its
    recency-weighted count (since its last retrieval, or its creation when none is known)."""
    if retrieval_count <= 0:
        return config.novelty_floor
    return recency_weighted_count(
        retrieval_count=retrieval_count,
        since=last_retrieved or created_at,
        now=now,
        decay_exponent=config.decay_exponent,
    )


def history(
    *,
    retrieval_count: int,
    last_retrieved: datetime | None,
    created_at: datetime,
    now: datetime,
    config: ActivationConfig = DEFAULT_ACTIVATION,
) -> float:
    """What a memory's recalls add to its score, in the config's form.

    Bounded: 0 for a memory never retrieved; else history_weight × a / (1 + a), a its
    recency-weighted count. It grows with every recall and fades with time since the last,
    is never below a memory never retrieved, and never reaches history_weight.
    """
    if config.history == SEED_HISTORY:
        return config.base_weight * base_activation(
            retrieval_count=retrieval_count,
            last_retrieved=last_retrieved,
            created_at=created_at,
            now=now,
            config=config,
        )
    if retrieval_count <= 0:
        return 0.0
    a = recency_weighted_count(
        retrieval_count=retrieval_count,
        since=last_retrieved or created_at,
        now=now,
        decay_exponent=config.decay_exponent,
    )
    # a / (1 + a), written with a once, as the database computes it (memories.recall.scoring).
    return config.history_weight * (1.0 - 1.0 / (1.0 + a))


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
    """The full score; `relevance_value` is None when the query is blank.

    The database path (memories.recall.scoring) adds the same terms in the same order, so a
    memory never retrieved scores bit for bit as here.
    """
    score = history(
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
    hits: int = 0  # Σ w(t) × f(t, m); 0 when the memory shares no token with the query
    # Its cosine with the query in thousandths, when recall blends in meaning (SPEC §3.2).
    cosine: int | None = None


@dataclass(frozen=True)
class Ranked:
    candidate: Candidate
    score: float


def rank(
    candidates: Iterable[Candidate],
    *,
    denominator: int | None,
    now: datetime,
    config: ActivationConfig = DEFAULT_ACTIVATION,
) -> list[Ranked]:
    """Score and order candidates; `denominator` is None for a blank query. With a query,
    candidates that share no word are dropped, unless they carry a cosine: those are
    the meaning-alone places the caller chose (SPEC §3.2).

    Ties (exactly equal scores) go to the newer `updated_at`, then the smaller id.
    """
    ranked: list[Ranked] = []
    for candidate in candidates:
        share: float | None = None
        if denominator is not None:
            if candidate.hits <= 0 and candidate.cosine is None:
                continue
            share = relevance_value(candidate.hits, denominator, candidate.cosine, config)
        score = activation(
            retrieval_count=candidate.retrieval_count,
            last_retrieved=candidate.last_retrieved,
            created_at=candidate.created_at,
            salience=candidate.salience,
            now=now,
            relevance_value=share,
            config=config,
        )
        ranked.append(Ranked(candidate, score))
    ranked.sort(key=order_key)
    return ranked


def order_key(item: Ranked) -> tuple[float, int, str]:
    return (-item.score, -micros(item.candidate.updated_at), str(item.candidate.id))
