"""taproot_recall: memories in full, by ids, query, category, tags or date."""

from datetime import datetime
from typing import Annotated, Any

from mcp_bridge import arguments as arg
from mcp_bridge import coercion as read
from mcp_bridge import embedding
from mcp_bridge.messages import skipped_prefixes
from mcp_bridge.toolkit import (
    CATEGORY,
    Reply,
    ToolDefinition,
    ToolParams,
    given,
    hints,
    read_category,
    reading,
    reading_warned,
    speaking,
    warned,
    with_reflect_hint,
)
from memories import services
from memories.errors import InvalidInput
from memories.jsonutil import dumps
from memories.limits import (
    DEFAULT_RECALL_LIMIT,
    MAX_ITEM_LENGTH,
    MAX_LIST_ITEMS,
    MAX_QUERY,
    MAX_RECALL_IDS,
    MAX_RECALL_LIMIT,
)
from memories.models import Category, User
from memories.quoting import shown
from memories.recall import QueryVector
from memories.refs import IdPrefix
from memories.services import Hit, RecallFilters

# Claude.ai cuts tool results near 150,000 characters; stop well before that.
MAX_REPLY_CHARS = 100_000
STOP_WORDS_NOTE = (
    "Every word of this query is too common to tell memories apart (what, did, the, …). "
    "Ask again with a distinctive word: a name, a place, a topic."
)


def _query(value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidInput(f"query must be text (got {shown(value)}).")
    return read.check_length(value, field="query", limit=MAX_QUERY)


def _category(value: object, warnings: list[str]) -> Category | None:
    if isinstance(value, str) and not value.strip():
        return None  # blank is an argument left out (models send "")
    return read_category(value, warnings)


def _ids(value: object, warnings: list[str]) -> read.IdList:
    id_list = read.split_id_list(value, field="ids", max_items=MAX_RECALL_IDS)
    if id_list.malformed:
        # One bad entry must not cost the others: it is skipped, and named.
        strings = all(isinstance(item, str) for item in id_list.malformed)
        warnings.append(
            "Skipped entries of ids that are not memory ids "
            f"(send {'' if strings else 'each as a string: '}{read.ID_FORMAT}): "
            + ", ".join(shown(item) for item in id_list.malformed)
            + "."
        )
    return id_list


def _tags(value: object) -> list[str]:
    return read.coerce_string_list(
        value, field="tags", max_items=MAX_LIST_ITEMS, max_length=MAX_ITEM_LENGTH
    )


def _since(value: object) -> datetime | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None  # blank text, like a blank category, is an argument left out
    return read.coerce_since(value)


def _limit(value: object) -> int:
    return read.coerce_int(value, field="limit", minimum=1, maximum=MAX_RECALL_LIMIT)


class RecallParams(ToolParams):
    query: Annotated[
        str | None,
        arg.text(
            "Words that would appear in the memory. Results are ranked by how well they match "
            "first; importance and how often and recently a memory was used order close "
            "matches."
        ),
        reading(_query),
    ]
    category: Annotated[Category | None, CATEGORY, reading_warned(_category)]
    ids: Annotated[
        read.IdList | None,
        arg.string_list(
            "Memory ids to load in full, as catalog lines show them (e.g. a002ab76) or whole.",
            max_items=MAX_RECALL_IDS,
        ),
        reading_warned(_ids),
    ]
    tags: Annotated[
        list[str],
        arg.string_list(
            "Only memories carrying all of these tags.",
            max_items=MAX_LIST_ITEMS,
            max_length=MAX_ITEM_LENGTH,
        ),
        reading(_tags),
    ]
    since: Annotated[
        datetime | None,
        arg.text(
            "Only memories updated on or after this ISO-8601 date-time, e.g. 2026-01-31T00:00:00Z.",
            fmt="date-time",
        ),
        reading(_since),
    ]
    limit: Annotated[
        int | None,
        arg.integer(
            f"How many memories to return at most (default {DEFAULT_RECALL_LIMIT}, or the number "
            "of ids given).",
            minimum=1,
            maximum=MAX_RECALL_LIMIT,
        ),
        reading(given(_limit)),
    ]


def recall_filters(**sent: object) -> tuple[RecallFilters, list[str]]:
    """The recall's arguments as filters, and the warnings reading them gave."""
    params = RecallParams.read(sent)
    ids = None
    prefixes: list[IdPrefix] = []
    if params.ids is not None:
        ids = params.ids.ids
        prefixes = [IdPrefix(hex, str(written)) for hex, written in params.ids.prefixes.items()]
        if not params.ids.malformed and not ids and not prefixes:
            # An empty list (however encoded) asks for no particular ids: it does not filter.
            ids = None
    if params.limit is not None:
        limit = params.limit
    elif ids or prefixes:
        limit = len(ids or []) + len(prefixes)
    else:
        limit = DEFAULT_RECALL_LIMIT
    filters = RecallFilters(
        query=params.query,
        category=params.category,
        ids=ids,
        tags=params.tags,
        since=params.since,
        limit=limit,
        prefixes=prefixes,
    )
    return filters, params.warnings


def _record(hit: Hit) -> Reply:
    record = hit.memory.as_record()
    record["activation_score"] = round(hit.score, 3)
    if hit.by_meaning:
        record["matched_by"] = "meaning"
    return record


@speaking()
def recall(
    *,
    owner: User,
    now: datetime | None = None,
    query_vector: QueryVector | None = None,
    **sent: object,
) -> Reply:
    """`query_vector`: the query's, embedded ahead (mcp_bridge.embedding)."""
    filters, warnings = recall_filters(**sent)
    size = len(dumps(_recall_reply([], warnings, truncated=True)))

    def fits(hit: Hit) -> bool:
        nonlocal size
        added = len(dumps(_record(hit))) + 1
        if size + added > MAX_REPLY_CHARS:
            return False
        size += added
        return True

    found = services.recall(
        owner=owner, filters=filters, fits=fits, now=now, query_vector=query_vector
    )
    if found.prefixes.ambiguous or found.prefixes.unknown:
        written = {p.hex: p.written for p in filters.prefixes}
        warnings.append(skipped_prefixes("ids", found.prefixes, written))
    if found.only_stop_words:
        reply = _recall_reply([], warnings, truncated=False, note=STOP_WORDS_NOTE)
        return with_reflect_hint(reply, owner, now=now)
    if found.missing:
        warnings.append(
            "No live memory of yours has these ids (unknown, archived or deleted): "
            + ", ".join(map(str, found.missing))
            + "."
        )
    results = [_record(hit) for hit in found.hits]
    reply = _recall_reply(results, warnings, truncated=found.truncated)
    return with_reflect_hint(reply, owner, now=now)


def _recall_reply(
    results: list[Reply], warnings: list[str], *, truncated: bool, note: str | None = None
) -> Reply:
    reply: Reply = {"status": "ok", "count": len(results), "results": results}
    if truncated:
        reply["truncated"] = True
        note = (
            f"More memories matched, but the reply stopped before {MAX_REPLY_CHARS:,} "
            "characters. Ask again with a narrower query, a lower limit or explicit ids."
        )
    if note:
        reply["note"] = note
    return warned(reply, warnings)


async def recall_ahead(**sent: object) -> dict[str, Any]:
    query = sent.get("query")
    text = query if isinstance(query, str) else ""
    return {"query_vector": await embedding.query_vector(text)}


TOOL = ToolDefinition(
    name="taproot_recall",
    position=3,
    title="Recall",
    description=(
        "Bring back memories in full when the conversation touches something you may "
        "have stored: by ids from catalog lines, by query (words the memory would "
        "contain), by category, tags (all must match) or since. Filters combine; with "
        "a query only memories that match it are returned, best first. Reaches "
        "everything, including memories the catalog leaves out. Returns {status, "
        "count, results, warnings?} with every field of each memory and its "
        "activation_score (and reflect_hint?, as for taproot_remember); ids that are "
        "malformed, ambiguous or name no live memory of yours are skipped and named in "
        "warnings. Changes no memory: it only records that the recalled ones were used, "
        "which orders future results and keeps them in the catalog; archived ones never "
        "come back."
    ),
    # Recording use is bookkeeping, like a file's access time; a write hint would make
    # Claude.ai ask the person before every recall.
    annotations=hints(read_only=True),
    handler=recall,
    params=RecallParams,
    ahead=recall_ahead,
)
