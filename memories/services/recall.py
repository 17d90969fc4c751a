"""taproot_recall: rank the caller's memories by activation and strengthen what is returned."""

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import F, QuerySet
from django.db.models.functions import Greatest

from memories.conf import activation_config
from memories.errors import InvalidInput
from memories.indexing import query_keys, tag_key
from memories.jsonutil import dumps
from memories.models import Memory, MemoryQuerySet, User
from memories.ranking import Candidate, Ranked, rank
from memories.services._common import now_or
from memories.validation import (
    DEFAULT_RECALL_LIMIT,
    MAX_ITEM_LENGTH,
    MAX_LIST_ITEMS,
    MAX_QUERY,
    MAX_RECALL_IDS,
    MAX_RECALL_LIMIT,
    check_length,
    coerce_category,
    coerce_id_list,
    coerce_int,
    coerce_since,
    coerce_string_list,
)

# Claude.ai cuts tool results near 150,000 characters; stop well before that.
MAX_REPLY_CHARS = 100_000
RANKING_FIELDS = ("id", "salience", "retrieval_count", "last_retrieved", "created_at", "updated_at")


@dataclass(frozen=True)
class RecallFilters:
    query: str | None
    category: str | None
    ids: list[uuid.UUID] | None
    tag_keys: list[str]
    since: datetime | None
    limit: int
    warnings: list[str]


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
            raise InvalidInput(f"query must be text (got {type(query).__name__}).")
        check_length(query, field="query", limit=MAX_QUERY)
    clean_category = None
    if category is not None and not (isinstance(category, str) and not category.strip()):
        clean_category, warning = coerce_category(category)
        if warning:
            warnings.append(warning)
    clean_ids = None
    if ids is not None:
        # An empty list (however encoded) asks for no particular ids: it does not filter.
        clean_ids = coerce_id_list(ids, field="ids", max_items=MAX_RECALL_IDS) or None
    tag_list = coerce_string_list(
        tags, field="tags", max_items=MAX_LIST_ITEMS, max_length=MAX_ITEM_LENGTH
    )
    # Blank text, like a blank category, is an argument left out (models send "").
    blank_since = since is None or (isinstance(since, str) and not since.strip())
    clean_since = None if blank_since else coerce_since(since)
    if limit is not None:
        clean_limit = coerce_int(limit, field="limit", minimum=1, maximum=MAX_RECALL_LIMIT)
    elif clean_ids:
        clean_limit = len(clean_ids)
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
    )


def candidate_queryset(owner: User, filters: RecallFilters) -> MemoryQuerySet:
    # Unordered: ranking sorts in Python, and an ORDER BY would steer the planner away
    # from the indexes that find the candidates.
    queryset = Memory.objects.for_owner(owner).live().order_by()
    if filters.category:
        queryset = queryset.in_category(filters.category)
    if filters.ids is not None:
        queryset = queryset.filter(pk__in=filters.ids)
    if filters.tag_keys:
        queryset = queryset.with_all_tags(filters.tag_keys, owner=owner)
    if filters.since:
        queryset = queryset.updated_since(filters.since)
    return queryset


def ranking_rows(owner: User, filters: RecallFilters) -> QuerySet[Memory, tuple[Any, ...]]:
    """The rows ranking reads, as Candidate fields: only what scoring needs, never content.

    With a query, only memories sharing a token with it, found through the index.
    """
    queryset = candidate_queryset(owner, filters)
    keys = query_keys(filters.query)
    if keys:
        return queryset.matching_tokens(keys, owner=owner).values_list(
            *RANKING_FIELDS, "keyword_hits", "content_hits"
        )
    return queryset.values_list(*RANKING_FIELDS)


def rank_memories(owner: User, filters: RecallFilters, *, now: datetime) -> list[Ranked]:
    """Every matching live memory of the owner, best first. Reads only; strengthens nothing."""
    candidates = [Candidate(*row) for row in ranking_rows(owner, filters)]
    keys = frozenset(query_keys(filters.query))
    return rank(candidates, query_tokens=keys, now=now, config=activation_config())


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
    # Ranking only reads, so it runs outside the write transaction: on SQLite that
    # transaction holds the database's one write lock, which other requests wait for.
    ranked = rank_memories(owner, filters, now=now)[: filters.limit]
    chosen_ids = [item.candidate.id for item in ranked]
    memories = Memory.objects.for_owner(owner).live().filter(pk__in=chosen_ids).order_by().in_bulk()
    results: list[dict[str, Any]] = []
    truncated = False
    size = len(dumps(_reply([], filters.warnings, truncated=True)))
    for item in ranked:
        memory = memories.get(item.candidate.id)
        if memory is None:  # deleted or archived by a concurrent request since it was ranked
            continue
        # Show the record as it will be after strengthening.
        memory.retrieval_count += 1
        memory.last_retrieved = now
        record = memory.as_record()
        record["activation_score"] = round(item.score, 3)
        added = len(dumps(record)) + 1
        if size + added > MAX_REPLY_CHARS:
            truncated = True
            break
        size += added
        results.append(record)
    if results:
        counts = _strengthen(owner, [uuid.UUID(r["id"]) for r in results], now=now)
        # A memory deleted or archived since it was read is not returned.
        results = [r for r in results if uuid.UUID(r["id"]) in counts]
        for record in results:
            record["retrieval_count"] = counts[uuid.UUID(record["id"])]
    return _reply(results, filters.warnings, truncated=truncated)


def _strengthen(owner: User, ids: list[uuid.UUID], *, now: datetime) -> dict[uuid.UUID, int]:
    """Count one more retrieval of each memory still live; their counts as now stored."""
    with transaction.atomic():
        # Locked (in id order, so two recalls never wait on each other crosswise): no
        # other request changes or archives them before the update below.
        counts = dict(
            Memory.objects.for_owner(owner)
            .live()
            .filter(pk__in=ids)
            .order_by("pk")
            .select_for_update()
            .values_list("pk", "retrieval_count")
        )
        Memory.objects.filter(pk__in=counts).update(
            retrieval_count=F("retrieval_count") + 1,
            last_retrieved=now,
            last_touched_at=Greatest(F("updated_at"), now),
        )
    return {pk: count + 1 for pk, count in counts.items()}


def _reply(
    results: list[dict[str, Any]], warnings: list[str], *, truncated: bool
) -> dict[str, Any]:
    reply: dict[str, Any] = {"status": "ok", "count": len(results), "results": results}
    if truncated:
        reply["truncated"] = True
        reply["note"] = (
            "More memories matched, but the reply stopped before 100,000 characters. Ask "
            "again with a narrower query, a lower limit or explicit ids."
        )
    if warnings:
        reply["warnings"] = warnings
    return reply
