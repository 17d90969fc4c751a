"""taproot_recall: rank the caller's memories by activation and strengthen what is returned."""

import dataclasses
import heapq
import math
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import connection, transaction

from memories.conf import activation_config, embedder, ranking_profile
from memories.embedding import Vector
from memories.errors import InvalidInput
from memories.indexing import tag_key
from memories.jsonutil import dumps
from memories.models import Memory, RecallEntry, User
from memories.ranking import (
    ActivationConfig,
    Candidate,
    Ranked,
    Relevance,
    parse_query,
    query_weights,
    rank,
)
from memories.scoring import EPSILON, Band, Filters, OwnerIndex, best_candidates, statistics
from memories.semantic import CACHE
from memories.services._common import now_or
from memories.services.loaded import with_reflect_hint
from memories.shortids import resolve_prefixes, skipped_prefixes_warning
from memories.timeutil import isoformat, micros
from memories.validation import (
    DEFAULT_RECALL_LIMIT,
    ID_FORMAT,
    MAX_ITEM_LENGTH,
    MAX_LIST_ITEMS,
    MAX_QUERY,
    MAX_RECALL_IDS,
    MAX_RECALL_LIMIT,
    check_length,
    coerce_category,
    coerce_int,
    coerce_since,
    coerce_string_list,
    shown,
    split_id_list,
)

# A blended query whose words this many memories hold in all (the sum of their document
# frequencies, at least the number of matches), and at least this share of the owner's
# store, narrows the cosine part's reach first. The scan that does it reads every vector
# of the store (2 ms at 100,000 memories), which pays only when the matches are a sizeable
# share of it.
WIDE_QUERY = 200
WIDE_SHARE = 1 / 50
# Claude.ai cuts tool results near 150,000 characters; stop well before that.
MAX_REPLY_CHARS = 100_000
STOP_WORDS_NOTE = (
    "Every word of this query is too common to tell memories apart (what, did, the, …). "
    "Ask again with a distinctive word: a name, a place, a topic."
)


@dataclass(frozen=True)
class RecallFilters:
    query: str | None
    category: str | None
    ids: list[uuid.UUID] | None
    tag_keys: list[str]
    since: datetime | None
    limit: int
    warnings: list[str]
    # Id prefixes sent in ids, not yet looked up (each → the entry as sent).
    prefixes: dict[str, Any] = field(default_factory=dict)


def parse_filters(
    *,
    query: Any = None,
    category: Any = None,
    ids: Any = None,
    tags: Any = None,
    since: Any = None,
    limit: Any = None,
) -> RecallFilters:
    warnings: list[str] = []
    if query is not None:
        if not isinstance(query, str):
            raise InvalidInput(f"query must be text (got {shown(query)}).")
        check_length(query, field="query", limit=MAX_QUERY)
    clean_category = None
    if category is not None and not (isinstance(category, str) and not category.strip()):
        clean_category, warning = coerce_category(category)
        if warning:
            warnings.append(warning)
    clean_ids = None
    prefixes: dict[str, Any] = {}
    if ids is not None:
        id_list = split_id_list(ids, field="ids", max_items=MAX_RECALL_IDS)
        clean_ids, prefixes = id_list.ids, id_list.prefixes
        if id_list.malformed:
            # One bad entry must not cost the others: it is skipped, and named.
            warnings.append(
                f"Skipped entries of ids that are not memory ids (send {ID_FORMAT}): "
                + ", ".join(shown(item) for item in id_list.malformed)
                + "."
            )
        elif not clean_ids and not prefixes:
            # An empty list (however encoded) asks for no particular ids: it does not filter.
            clean_ids = None
    tag_list = coerce_string_list(
        tags, field="tags", max_items=MAX_LIST_ITEMS, max_length=MAX_ITEM_LENGTH
    )
    # Blank text, like a blank category, is an argument left out (models send "").
    blank_since = since is None or (isinstance(since, str) and not since.strip())
    clean_since = None if blank_since else coerce_since(since)
    if limit is not None:
        clean_limit = coerce_int(limit, field="limit", minimum=1, maximum=MAX_RECALL_LIMIT)
    elif clean_ids or prefixes:
        clean_limit = len(clean_ids or []) + len(prefixes)
    else:
        clean_limit = DEFAULT_RECALL_LIMIT
    return RecallFilters(
        query=query,
        category=clean_category,
        ids=clean_ids,
        tag_keys=[tag_key(t) for t in tag_list],
        since=clean_since,
        limit=clean_limit,
        warnings=warnings,
        prefixes=prefixes,
    )


def resolve_id_prefixes(owner: User, filters: RecallFilters) -> RecallFilters:
    """The filters with each id prefix replaced by the one memory it names; a prefix naming
    none or several is skipped and named, with the candidates, in a warning."""
    if not filters.prefixes:
        return filters
    resolved = resolve_prefixes(owner, list(filters.prefixes))
    warnings = list(filters.warnings)
    if resolved.ambiguous or resolved.unknown:
        warnings.append(skipped_prefixes_warning("ids", resolved, filters.prefixes))
    ids = list(dict.fromkeys([*(filters.ids or []), *resolved.ids.values()]))
    return dataclasses.replace(filters, ids=ids, prefixes={}, warnings=warnings)


@dataclass(frozen=True)
class Ranking:
    """A recall's ranked memories, whether its query was all stop words, and which of
    them were found by meaning alone."""

    ranked: list[Ranked]
    only_stop_words: bool = False
    meaning_only: set[uuid.UUID] = field(default_factory=set)


def rank_memories(owner: User, filters: RecallFilters, *, now: datetime) -> Ranking:
    """The owner's best `filters.limit` live memories, best first. Reads only.

    The database scores and cuts (memories.scoring); what it returns is re-scored with
    the reference formula, so scores, order and ties are exactly SPEC §3's. With an
    embedder, each lexical match's relevance blends in its cosine with the query, and
    memories sharing no word may fill places left over (SPEC §3.2).
    """
    if filters.ids == []:  # every id given was malformed: nothing can match
        return Ranking([])
    profile = ranking_profile()
    config = activation_config()
    query = parse_query(filters.query, profile)
    if query.only_stop_words:
        return Ranking([], only_stop_words=True)
    keyword_factor, content_factor = profile.factors(config)
    narrowing = Filters(
        category=filters.category, ids=filters.ids, tag_keys=filters.tag_keys, since=filters.since
    )
    weights: dict[str, int] | None = None
    denominator = 0
    owner_index = OwnerIndex()
    semantic = embedder() if not query.blank else None
    if not query.blank:
        owner_index = statistics(owner.pk, query.tokens) if profile.idf else owner_index
        weights = query_weights(
            query, profile=profile, live=owner_index.live, df=owner_index.df, config=config
        )
        denominator = Relevance(weights, keyword_factor, content_factor).denominator
    query_vector = semantic.embed([filters.query or ""])[0] if semantic else None
    ceiling = 1000
    held = sum(owner_index.df.values())
    if query_vector is not None and held >= max(WIDE_QUERY, WIDE_SHARE * owner_index.live):
        # Many matches, so many rows within reach of the cosine part: the best cosine any
        # memory has with the query narrows that reach (to about half, typically) for the
        # price of one scan of the vectors the worker keeps.
        assert semantic is not None
        ceiling = CACHE.ceiling(owner.pk, query_vector, embedder=semantic, index=owner_index)
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
    if band.matched < filters.limit:
        alone = _meaning_alone(
            owner,
            query_vector,
            narrowing,
            places=filters.limit - band.matched,
            exclude={uuid.UUID(int=key) for key in band.keys},
            owner_index=owner_index,
            now=now,
            config=config,
        )
    ranked = rank(matches + alone, denominator=denominator, now=now, config=config)
    return Ranking(ranked[: filters.limit], meaning_only={c.id for c in alone})


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
    owner_index: OwnerIndex,
    now: datetime,
    config: ActivationConfig,
) -> list[Candidate]:
    """Memories sharing no word with the query whose cosine reaches the floor, the best
    `places` of them that the filters admit, best cosine first (SPEC §3.2)."""
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


def recall(
    *,
    owner: User,
    query: Any = None,
    category: Any = None,
    ids: Any = None,
    tags: Any = None,
    since: Any = None,
    limit: Any = None,
    now: datetime | None = None,
) -> dict[str, Any]:
    now = now_or(now)
    filters = parse_filters(
        query=query, category=category, ids=ids, tags=tags, since=since, limit=limit
    )
    filters = resolve_id_prefixes(owner, filters)
    # Ranking only reads, so it runs outside the write transaction: on SQLite that
    # transaction holds the database's one write lock, which other requests wait for.
    ranking = rank_memories(owner, filters, now=now)
    if ranking.only_stop_words:
        reply = _reply([], filters.warnings, truncated=False, note=STOP_WORDS_NOTE)
        return with_reflect_hint(reply, owner, now=now)
    ranked = ranking.ranked
    chosen_ids = [item.candidate.id for item in ranked]
    memories = Memory.objects.for_owner(owner).live().filter(pk__in=chosen_ids).order_by().in_bulk()
    results: list[dict[str, Any]] = []
    stored_last_retrieved: dict[uuid.UUID, datetime | None] = {}
    truncated = False
    size = len(dumps(_reply([], filters.warnings, truncated=True)))
    for item in ranked:
        memory = memories.get(item.candidate.id)
        if memory is None:  # deleted or archived by a concurrent request since it was ranked
            continue
        stored_last_retrieved[memory.pk] = memory.last_retrieved
        # Show the record as it will be after strengthening.
        memory.retrieval_count += 1
        memory.last_retrieved = now
        record = memory.as_record()
        record["activation_score"] = round(item.score, 3)
        if memory.pk in ranking.meaning_only:
            # A guess by meaning, not a retrieval: shown as stored, not strengthened.
            record["retrieval_count"] -= 1
            record["last_retrieved"] = isoformat(stored_last_retrieved[memory.pk])
            record["matched_by"] = "meaning"
        added = len(dumps(record)) + 1
        if size + added > MAX_REPLY_CHARS:
            truncated = True
            break
        size += added
        results.append(record)
    retrieved = [uuid.UUID(r["id"]) for r in results if "matched_by" not in r]
    if retrieved:
        counts = _strengthen(owner, retrieved, now=now)
        # A memory deleted or archived since it was read is not returned.
        results = [r for r in results if "matched_by" in r or uuid.UUID(r["id"]) in counts]
        for record in results:
            if "matched_by" not in record:
                record["retrieval_count"] = counts[uuid.UUID(record["id"])]
    warnings = filters.warnings
    if filters.ids and (missing := _missing(owner, filters.ids, results)):
        warnings = [
            *warnings,
            "No live memory of yours has these ids (unknown, archived or deleted): "
            + ", ".join(map(str, missing))
            + ".",
        ]
    return with_reflect_hint(_reply(results, warnings, truncated=truncated), owner, now=now)


def _missing(owner: User, ids: list[uuid.UUID], results: list[dict[str, Any]]) -> list[uuid.UUID]:
    """The ids that name no live memory of the owner's. Those returned, or left out only by
    the query, the limit or the reply's size, are not missing."""
    returned = {uuid.UUID(record["id"]) for record in results}
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


def _strengthen(owner: User, ids: list[uuid.UUID], *, now: datetime) -> dict[uuid.UUID, int]:
    """Count one more retrieval of each memory still live; their counts as now stored.

    Raw SQL, because the ORM has no UPDATE … RETURNING: the counts come back from the
    statement that raises them, with no read before it. On PostgreSQL one statement
    locks the memories in id order (so two recalls never wait on each other crosswise),
    raises each count from the row as it stands once locked (so concurrent recalls lose
    no increment), skips a memory archived or deleted meanwhile, and raises its recall
    entry's count with it. SQLite cannot change two tables in one statement: there it is
    two, in one transaction, which holds the database's write lock throughout.
    """
    memory_ids = [Memory._meta.pk.get_db_prep_value(i, connection) for i in ids]
    moment = connection.ops.adapt_datetimefield_value(now)
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(
                _STRENGTHEN_POSTGRES,
                [owner.pk, memory_ids, moment, moment, micros(now)],
            )
            rows = cursor.fetchall()
    else:
        marks = ", ".join(["%s"] * len(memory_ids))
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(
                _STRENGTHEN_MEMORIES.format(ids=marks), [moment, moment, owner.pk, *memory_ids]
            )
            rows = cursor.fetchall()
            if rows:
                marks = ", ".join(["%s"] * len(rows))
                cursor.execute(
                    _STRENGTHEN_ENTRIES.format(ids=marks), [micros(now), *(pk for pk, _ in rows)]
                )
    return {_as_uuid(pk): count for pk, count in rows}


def _as_uuid(value: uuid.UUID | str) -> uuid.UUID:
    return value if isinstance(value, uuid.UUID) else uuid.UUID(value)


_MEMORY = Memory._meta.db_table
_ENTRY = RecallEntry._meta.db_table
_STRENGTHEN_POSTGRES = f"""
WITH chosen AS (
    SELECT id FROM {_MEMORY}
    WHERE owner_id = %s AND archived_at IS NULL AND id = ANY(%s)
    ORDER BY id FOR UPDATE
), strengthened AS (
    UPDATE {_MEMORY} AS m
    SET retrieval_count = m.retrieval_count + 1, last_retrieved = %s,
        last_touched_at = GREATEST(m.updated_at, %s)
    FROM chosen WHERE m.id = chosen.id
    RETURNING m.id, m.retrieval_count
), entries AS (
    UPDATE {_ENTRY} AS e
    SET retrieval_count = e.retrieval_count + 1, last_retrieved_us = %s
    FROM strengthened WHERE e.memory_id = strengthened.id
)
SELECT id, retrieval_count FROM strengthened
"""
_STRENGTHEN_MEMORIES = f"""
UPDATE {_MEMORY}
SET retrieval_count = retrieval_count + 1, last_retrieved = %s,
    last_touched_at = MAX(updated_at, %s)
WHERE owner_id = %s AND archived_at IS NULL AND id IN ({{ids}})
RETURNING id, retrieval_count
"""
_STRENGTHEN_ENTRIES = f"""
UPDATE {_ENTRY} SET retrieval_count = retrieval_count + 1, last_retrieved_us = %s
WHERE memory_id IN ({{ids}})
"""


def _reply(
    results: list[dict[str, Any]],
    warnings: list[str],
    *,
    truncated: bool,
    note: str | None = None,
) -> dict[str, Any]:
    reply: dict[str, Any] = {"status": "ok", "count": len(results), "results": results}
    if truncated:
        reply["truncated"] = True
        note = (
            f"More memories matched, but the reply stopped before {MAX_REPLY_CHARS:,} "
            "characters. Ask again with a narrower query, a lower limit or explicit ids."
        )
    if note:
        reply["note"] = note
    if warnings:
        reply["warnings"] = warnings
    return reply
