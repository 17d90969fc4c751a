"""Recall: rank the caller's memories by activation and strengthen what is returned."""

import dataclasses
import functools
import heapq
import math
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np
import numpy.typing as npt
from django.db import connection
from django.db.models.query import RawQuerySet

from memories.conf import activation_config, embedder, ranking_profile
from memories.limits import DEFAULT_RECALL_LIMIT
from memories.models import Category, Memory, User
from memories.recall.embedding import Embedder, Vector
from memories.recall.impact import CosineBound, holding_any
from memories.recall.indexing import tag_key
from memories.recall.owner_index import OwnerIndex
from memories.recall.postings import POSTINGS, matches_of
from memories.recall.ranking import (
    ActivationConfig,
    Candidate,
    Ranked,
    Relevance,
    parse_query,
    query_weights,
    rank,
)
from memories.recall.scoring import EPSILON, Band, Filters, best_candidates
from memories.recall.semantic import QueryVector, embed_query
from memories.recall.vector_cache import CACHE
from memories.refs import IdPrefix, Resolved
from memories.services._common import distinct, now_or
from memories.services.strengthening import strengthen
from memories.shortids import resolve_prefixes

# A blended query whose words this many memories hold in all (the sum of their document
# frequencies, at least the number of matches), and at least this share of the owner's
# store, narrows the cosine part's reach first. The scan that does it reads every vector
# of the store (5 ms at 100,000 memories on one core), which pays only when the matches
# are a sizeable share of it: on the bench's store of 100,000 it saves about what it costs
# for queries of middle and common words (docs/benchmarks.md).
WIDE_QUERY = 200
WIDE_SHARE = 1 / 50
# A held recall bounds it by the vectors of the matches that could place, when they are
# at most this share of the owner's store: at 100,000 memories a scan of all took 10–12
# ms, of 8,000 chosen 6.4–7.1 ms, of 12,000 9.7–11.5 (bench.chosen_scan,
# docs/benchmarks.md).
CHOSEN_SHARE = 8


@dataclass(frozen=True)
class RecallFilters:
    """What a recall asks for: a query, and filters that all hold (category, ids, tags,
    updated since), and how many memories at most."""

    query: str | None = None
    category: Category | None = None
    ids: list[uuid.UUID] | None = None  # None: any memory; [] none (every id was malformed)
    tags: list[str] = field(default_factory=list)
    since: datetime | None = None
    limit: int = DEFAULT_RECALL_LIMIT
    # Id prefixes among the ids asked for, resolved by the recall.
    prefixes: list[IdPrefix] = field(default_factory=list)

    @property
    def tag_keys(self) -> list[str]:
        return [tag_key(t) for t in self.tags]


def resolve_id_prefixes(owner: User, filters: RecallFilters) -> tuple[RecallFilters, Resolved]:
    """The filters with each id prefix replaced by the one memory it names, and what the
    prefixes named (one naming none or several is skipped)."""
    if not filters.prefixes:
        return filters, Resolved()
    resolved = resolve_prefixes(owner, [p.hex for p in filters.prefixes])
    ids = distinct([*(filters.ids or []), *resolved.ids.values()])
    return dataclasses.replace(filters, ids=ids, prefixes=[]), resolved


@dataclass(frozen=True)
class Ranking:
    """A recall's ranked memories, whether its query was all stop words, and which of
    them were found by meaning alone."""

    ranked: list[Ranked]
    only_stop_words: bool = False
    meaning_only: set[uuid.UUID] = field(default_factory=set)
    # The ranked memories themselves, when ranking read them whole (a recall by ids alone).
    memories: dict[uuid.UUID, Memory] | None = None


def rank_memories(
    owner: User, filters: RecallFilters, *, now: datetime, ahead: QueryVector | None = None
) -> Ranking:
    """The owner's best `filters.limit` live memories, best first. Reads only. `ahead` is
    the query's vector when the caller embedded it already.

    The database scores and cuts (memories.recall.scoring); what it returns is re-scored with
    the reference formula, so scores, order and ties are exactly SPEC §3's. With an
    embedder, each lexical match's relevance blends in its cosine with the query, and
    memories sharing no word may fill places left over (SPEC §3.2). A recall by ids alone
    (no query, no tags) reads its few memories whole and scores them here (`_by_ids`).
    """
    if filters.ids == []:  # every id given was malformed: nothing can match
        return Ranking([])
    profile = ranking_profile()
    config = activation_config()
    query = parse_query(filters.query, profile)
    if query.only_stop_words:
        return Ranking([], only_stop_words=True)
    if query.blank and filters.ids is not None and not filters.tags:
        return _by_ids(owner, filters, now=now, config=config)
    keyword_factor, content_factor = profile.factors(config)
    narrowing = Filters(
        category=filters.category, ids=filters.ids, tag_keys=filters.tag_keys, since=filters.since
    )
    weights: dict[str, int] | None = None
    denominator = 0
    owner_index = OwnerIndex()
    postings = held = None
    semantic = embedder() if not query.blank else None
    if not query.blank:
        if profile.idf:
            owner_index, postings = POSTINGS.statistics(owner.pk, query.tokens)
        weights = query_weights(
            query, profile=profile, live=owner_index.live, df=owner_index.df, config=config
        )
        denominator = Relevance(weights, keyword_factor, content_factor).denominator
        if postings is not None:
            held = matches_of(postings, weights, (keyword_factor, content_factor), config)
    query_vector = embed_query(semantic, filters.query or "", ahead) if semantic else None
    ceiling = 1000
    cosine_bound = None
    holding = sum(owner_index.df.values())
    if query_vector is not None and holding >= max(WIDE_QUERY, WIDE_SHARE * owner_index.live):
        # Many matches, so many rows within reach of the cosine part: the best cosine the
        # query has with the matches that could place (held ones), or with any memory,
        # narrows that reach (to about half, typically) for the price of a scan of the
        # vectors the worker keeps.
        assert semantic is not None
        cosine_bound = CosineBound(
            functools.partial(
                _ceiling, owner.pk, query_vector, embedder=semantic, index=owner_index
            ),
            most_chosen=owner_index.live // CHOSEN_SHARE,
        )
        if held is None:
            ceiling, cosine_bound = cosine_bound.ceiling(None), None
    band = best_candidates(
        owner.pk,
        weights=weights,
        factors=(keyword_factor, content_factor),
        denominator=denominator,
        filters=narrowing,
        limit=filters.limit,
        now=now,
        config=config,
        blend=query_vector is not None,
        cosine_ceiling=ceiling,
        held=held,
        cosine_bound=cosine_bound,
    )
    if query_vector is None:
        ranked = rank(
            band.candidates,
            denominator=None if weights is None else denominator,
            now=now,
            config=config,
        )
        return Ranking(ranked[: filters.limit])
    assert semantic is not None
    stored = CACHE.cosines(owner.pk, query_vector, band.keys, embedder=semantic, index=owner_index)
    # A match without a vector (written while the embedder was off) counts cosine 0.
    matches = _finalists(
        band, [cosine or 0 for cosine in stored], limit=filters.limit, config=config
    )
    alone: list[Candidate] = []
    # The embedder's nearest compete with the matches; places the matches leave go to the
    # next nearest.
    places = max(config.dense_candidates, filters.limit - band.matched)
    if places > 0:
        alone = _meaning_alone(
            owner,
            query_vector,
            narrowing,
            places=places,
            exclude={uuid.UUID(int=key) for key in band.keys},
            # Matches the band left out (too far below the cut) are matches all the same.
            unbanded_keys=query.tokens if band.matched > len(band.keys) else (),
            owner_index=owner_index,
            now=now,
            config=config,
        )
    ranked = rank(matches + alone, denominator=denominator, now=now, config=config)
    return Ranking(ranked[: filters.limit], meaning_only={c.id for c in alone})


def _by_ids(
    owner: User, filters: RecallFilters, *, now: datetime, config: ActivationConfig
) -> Ranking:
    """A recall by ids alone (no query, no tags): at most MAX_RECALL_IDS memories, read
    whole in one statement and ranked here by the reference formula, from the fields their
    recall entries copy. The memories come back with the ranking, so the recall reads
    nothing more before it strengthens them."""
    memories = {memory.pk: memory for memory in _live_by_ids(owner, filters)}
    candidates = [
        Candidate(
            id=memory.pk,
            salience=memory.salience,
            retrieval_count=memory.retrieval_count,
            last_retrieved=memory.last_retrieved,
            created_at=memory.created_at,
            updated_at=memory.updated_at,
        )
        for memory in memories.values()
    ]
    ranked = rank(candidates, denominator=None, now=now, config=config)
    return Ranking(ranked[: filters.limit], memories=memories)


def _live_by_ids(owner: User, filters: RecallFilters) -> RawQuerySet[Memory]:
    """The owner's live memories among `filters.ids`, in their category and updated since,
    when those are asked for. A statement written once: the ORM's query for it costs about
    as much to compile as the database takes to answer it."""
    assert filters.ids
    pk = Memory._meta.pk
    assert pk is not None
    conditions = [_LIVE_BY_IDS.format(ids=", ".join(["%s"] * len(filters.ids)))]
    params: list[object] = [owner.pk, *(pk.get_db_prep_value(i, connection) for i in filters.ids)]
    if filters.category is not None:
        conditions.append("category = %s")
        params.append(filters.category)
    if filters.since is not None:
        conditions.append("updated_at >= %s")
        params.append(connection.ops.adapt_datetimefield_value(filters.since))
    return Memory.objects.raw(" AND ".join(conditions), params)


def _ceiling(
    owner_id: int,
    query_vector: Vector,
    keys: npt.NDArray[np.uint64] | None,
    *,
    embedder: Embedder,
    index: OwnerIndex,
) -> int:
    """The most cosine (thousandths) the query has with these memories, or any (None)."""
    return CACHE.ceiling(owner_id, query_vector, embedder=embedder, index=index, keys=keys)


def _finalists(
    band: Band, cosines: list[int], *, limit: int, config: ActivationConfig
) -> list[Candidate]:
    """The lexical matches of the band that can still take one of the `limit` places once
    their cosines are blended in, each with its cosine.

    The band holds every row the cosine part could lift past the database's cut, which
    for a query of common words is hundreds. Their scores in floats (the database's score
    of the lexical part plus the cosine part) differ from the exact ones by far less than
    EPSILON, so only rows within EPSILON of the `limit`-th best float need the exact
    score: the others cannot come in.
    """
    weight = config.relevance_weight * config.semantic_share / 1000
    approximate = [score + weight * c for score, c in zip(band.scores, cosines, strict=True)]
    cut = (
        heapq.nlargest(limit, approximate)[-1] - EPSILON if len(approximate) > limit else -math.inf
    )
    chosen = [i for i, score in enumerate(approximate) if score >= cut]
    return [
        dataclasses.replace(candidate, cosine=cosines[i])
        for i, candidate in zip(chosen, band.candidates_at(chosen), strict=True)
    ]


def _meaning_alone(
    owner: User,
    query_vector: Vector,
    narrowing: Filters,
    *,
    places: int,
    exclude: set[uuid.UUID],
    unbanded_keys: Sequence[str],
    owner_index: OwnerIndex,
    now: datetime,
    config: ActivationConfig,
) -> list[Candidate]:
    """Memories sharing no word with the query whose cosine reaches the floor, the best
    `places` of them that the filters admit, best cosine first (SPEC §3.2). `exclude`
    holds matches; when some matches are not in it, `unbanded_keys` are the query's
    keys, and a memory holding one is left out too."""
    semantic = embedder()
    assert semantic is not None
    # The cache may hold memories since archived or deleted, or outside the filters: ask
    # it for more than the places, and for more again when too few of them are admitted.
    wanted = 4 * places + 16
    while True:
        nearest = CACHE.nearest(
            owner.pk,
            query_vector,
            embedder=semantic,
            index=owner_index,
            floor_milli=config.meaning_floor,
            limit=wanted,
            exclude=exclude,
        )
        cosine_of = dict(nearest)
        candidate_ids = [i for i in cosine_of if narrowing.ids is None or i in narrowing.ids]
        if unbanded_keys and candidate_ids:
            matching = holding_any(owner.pk, unbanded_keys, candidate_ids)
            candidate_ids = [i for i in candidate_ids if i not in matching]
        admitted = (
            best_candidates(
                owner.pk,
                weights=None,
                factors=(0, 0),
                denominator=0,
                filters=dataclasses.replace(narrowing, ids=candidate_ids),
                limit=len(candidate_ids),
                now=now,
                config=config,
            ).candidates
            if candidate_ids
            else []
        )
        if len(admitted) >= places or len(nearest) < wanted:
            break
        wanted *= 4
    chosen = sorted(admitted, key=lambda c: (-cosine_of[c.id], str(c.id)))[:places]
    return [dataclasses.replace(c, cosine=cosine_of[c.id]) for c in chosen]


@dataclass(frozen=True)
class Hit:
    """A recalled memory as it stands after the recall, its score, and whether it was
    found by meaning alone (a guess, not a retrieval: not strengthened)."""

    memory: Memory
    score: float
    by_meaning: bool = False


@dataclass(frozen=True)
class Recalled:
    """What a recall found, best first; whether more would have been returned but for the
    caller's `fits`; whether the query was all stop words; the ids asked for that name no
    live memory of the owner's; and what the id prefixes asked for named."""

    hits: list[Hit]
    truncated: bool = False
    only_stop_words: bool = False
    missing: list[uuid.UUID] = field(default_factory=list)
    prefixes: Resolved = field(default_factory=Resolved)


# Whether one more hit fits what the caller can send (a reply's size, say); the hits are
# offered best first, as they will stand once strengthened.
Fits = Callable[[Hit], bool]


def recall(
    *,
    owner: User,
    filters: RecallFilters,
    fits: Fits | None = None,
    now: datetime | None = None,
    query_vector: QueryVector | None = None,
) -> Recalled:
    """The owner's best live memories for these filters, each recall counted as a use
    (strengthened: SPEC §3), except those found by meaning alone. `fits`, when given, is
    asked before each hit is taken; the first that does not fit ends the list.
    `query_vector` is the query's, embedded ahead by the caller (see
    memories.recall.semantic.embed_query)."""
    now = now_or(now)
    filters, resolved = resolve_id_prefixes(owner, filters)
    # Ranking only reads, so it runs outside the write transaction: on SQLite that
    # transaction holds the database's one write lock, which other requests wait for.
    ranking = rank_memories(owner, filters, now=now, ahead=query_vector)
    if ranking.only_stop_words:
        return Recalled([], only_stop_words=True, prefixes=resolved)
    memories = ranking.memories
    if memories is None:
        chosen_ids = [item.candidate.id for item in ranking.ranked]
        found = Memory.objects.for_owner(owner).live().filter(pk__in=chosen_ids).order_by()
        memories = found.in_bulk()
    hits: list[Hit] = []
    truncated = False
    for item in ranking.ranked:
        memory = memories.get(item.candidate.id)
        if memory is None:  # deleted or archived by a concurrent request since it was ranked
            continue
        by_meaning = memory.pk in ranking.meaning_only
        if not by_meaning:
            # As it will stand once strengthened.
            memory.retrieval_count += 1
            memory.last_retrieved = now
        hit = Hit(memory, item.score, by_meaning)
        if fits is not None and not fits(hit):
            truncated = True
            break
        hits.append(hit)
    retrieved = [hit.memory.pk for hit in hits if not hit.by_meaning]
    if retrieved:
        counts = strengthen(owner, retrieved, now=now)
        # A memory deleted or archived since it was read is not returned.
        hits = [hit for hit in hits if hit.by_meaning or hit.memory.pk in counts]
        for hit in hits:
            if not hit.by_meaning:
                hit.memory.retrieval_count = counts[hit.memory.pk]
    missing = _missing(owner, filters.ids, hits) if filters.ids else []
    return Recalled(hits, truncated=truncated, missing=missing, prefixes=resolved)


def _missing(owner: User, ids: list[uuid.UUID], hits: list[Hit]) -> list[uuid.UUID]:
    """The ids that name no live memory of the owner's. Those returned, or left out only by
    the query, the limit or the caller's `fits`, are not missing."""
    returned = {hit.memory.pk for hit in hits}
    unreturned = [i for i in ids if i not in returned]
    if not unreturned:  # the usual recall by ids: no query needed
        return []
    live = set(
        Memory.objects.for_owner(owner)
        .live()
        .filter(pk__in=unreturned)
        .values_list("pk", flat=True)
    )
    return [i for i in unreturned if i not in live]


_COLUMNS = ", ".join(str(field.column) for field in Memory._meta.concrete_fields)
_LIVE_BY_IDS = (
    f"SELECT {_COLUMNS} FROM {Memory._meta.db_table}"
    " WHERE owner_id = %s AND archived_at IS NULL AND id IN ({ids})"
)
