"""What each tool does with what Claude sent: read the arguments into the values the
services take (mcp_bridge.coercion, with its warnings), call the service, and answer with
the JSON reply the tool's description promises. A service's refusal is worded here for
the model (mcp_bridge.messages) and raised as InvalidInput, which the tool sends as its
error reply.

Each handler takes the tool's arguments by name, as sent (None when left out), and the
owner the token belongs to.
"""

import functools
import uuid
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, ParamSpec, TypeVar

from mcp_bridge import coercion as read
from mcp_bridge.auth import token_loads
from mcp_bridge.messages import say, skipped_prefixes
from memories import services, shortids
from memories.conf import reflect_nudge_hours
from memories.errors import DomainError, InvalidInput, TooFewToCompress
from memories.jsonutil import dumps
from memories.limits import (
    DEFAULT_RECALL_LIMIT,
    MAX_CONTENT,
    MAX_GIST,
    MAX_ITEM_LENGTH,
    MAX_LINKS,
    MAX_LIST_ITEMS,
    MAX_QUERY,
    MAX_REASON,
    MAX_RECALL_IDS,
    MAX_RECALL_LIMIT,
    MAX_REFLECTION,
    MAX_TITLE,
)
from memories.models import Category, ChangeSource, EpistemicStatus, Memory, Salience, User
from memories.quoting import shown
from memories.recall import QueryVector, Vectors
from memories.refs import IdPrefix, MemoryRef, Resolved
from memories.services import Hit, MemoryDraft, RecallFilters, ReflectDue, Remembered
from memories.timeutil import isoformat
from memories.vocabulary import CATEGORY_VALUES

P = ParamSpec("P")
R = TypeVar("R")

FORGET_ACTIONS = ("archive", "unarchive", "delete", "compress")
CLOSING_MESSAGE = "Reflection stored. Safe travels."
GIST_WHY = (
    "A new memory needs a gist now: one line of about 15 words that stands for it in the "
    "catalog loaded at the start of every conversation. It is cheapest to write while the "
    "memory is fresh."
)
REFLECT_HINTS = {
    ReflectDue.NEVER_LOADED: (
        "Call taproot_reflect before going on: your memory of this user has not been loaded yet."
    ),
    ReflectDue.CLOSED_SINCE: (
        "Call taproot_reflect before going on: a conversation has closed since your memory "
        "was last loaded, so this one has not loaded it."
    ),
    ReflectDue.STALE: (
        "Call taproot_reflect before going on: your memory was last loaded more than {hours} "
        "hours ago, probably in another conversation."
    ),
}
# Claude.ai cuts tool results near 150,000 characters; stop well before that.
MAX_REPLY_CHARS = 100_000
STOP_WORDS_NOTE = (
    "Every word of this query is too common to tell memories apart (what, did, the, …). "
    "Ask again with a distinctive word: a name, a place, a topic."
)

Reply = dict[str, Any]


def speaking(field: str = "memory_id") -> Callable[[Callable[P, R]], Callable[P, R]]:
    """A handler whose services' refusals reach Claude worded by mcp_bridge.messages;
    `field` names the argument an ambiguous id prefix came in."""

    def decorate(handler: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(handler)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            try:
                return handler(*args, **kwargs)
            except DomainError as error:
                raise InvalidInput(say(error, field=field)) from None

        return wrapper

    return decorate


def resolve_memory_id(owner: User, value: Any, *, field: str = "memory_id") -> uuid.UUID:
    """The whole id a single-id argument names: as sent, or the one memory of the owner's
    whose id starts with the prefix sent. A prefix naming none or several is refused."""
    try:
        return shortids.resolve_memory_id(owner, read.memory_ref(value, field=field))
    except DomainError as error:
        raise InvalidInput(say(error, field=field)) from None


def reflect_hint(*, owner: User, now: datetime | None = None) -> str | None:
    """The nudge a remember or recall reply carries while a reflect is due: from the last
    reflect and close read with the request's token, so no query of its own on /mcp."""
    due = services.reflect_due(owner=owner, now=now, known=token_loads(owner))
    if due is None:
        return None
    return REFLECT_HINTS[due].format(hours=reflect_nudge_hours())


def with_reflect_hint(reply: Reply, owner: User, *, now: datetime | None) -> Reply:
    if hint := reflect_hint(owner=owner, now=now):
        reply["reflect_hint"] = hint
    return reply


def _warned(reply: Reply, warnings: list[str]) -> Reply:
    if warnings:
        reply["warnings"] = warnings
    return reply


def _category(value: Any, warnings: list[str]) -> Category:
    category, warning = read.coerce_category(value)
    if warning:
        warnings.append(warning)
    return Category(category)


def _salience(value: Any, warnings: list[str]) -> Salience:
    salience, warning = read.coerce_salience(value)
    if warning:
        warnings.append(warning)
    return Salience(salience)


# --- taproot_remember ------------------------------------------------------------------


@speaking("update_id")
def remember(
    *,
    owner: User,
    update_id: Any = None,
    source: ChangeSource = ChangeSource.TOOL,
    now: datetime | None = None,
    vectors: Vectors | None = None,
    **fields: Any,
) -> Reply:
    """`fields`: the memory's arguments as sent (those of `_read_draft`); `vectors`: the
    new memory's, embedded ahead (mcp_bridge.embedding)."""
    update_id = _blank_as_none(update_id)
    # Refused here, before the other arguments, when it names no memory or several.
    update = None if update_id is None else resolve_memory_id(owner, update_id, field="update_id")
    given, warnings, malformed = _read_draft(creating=update is None, **fields)
    done = services.remember(
        owner=owner,
        draft=MemoryDraft(**given),
        update=update,
        source=source,
        now=now,
        vectors=vectors,
    )
    warnings.extend(_remember_warnings(done, malformed, given.get("linked_memories", [])))
    memory = done.memory
    reply = {
        "status": "ok",
        "action": "created" if done.created else "updated",
        "memory_id": str(memory.pk),
        "category": memory.category,
        "core": memory.core,
    }
    if done.already_stored:
        reply["already_stored"] = True
    return with_reflect_hint(_warned(reply, warnings), owner, now=now)


def remembered_ahead(*, update_id: Any = None, **fields: Any) -> list[Memory]:
    """The memory a taproot_remember call would create, unsaved, for embedding ahead of
    it (read exactly as `remember` reads it); none for an update or a refused call."""
    if _blank_as_none(update_id) is not None:
        return []
    try:
        given, _, _ = _read_draft(creating=True, **fields)
        return [Memory(**MemoryDraft(**given).given())]
    except (InvalidInput, DomainError):
        return []


def _blank_as_none(update_id: Any) -> Any:
    if isinstance(update_id, str) and not update_id.strip():
        return None  # models send "" for an argument they mean to leave out
    return update_id


def _read_draft(
    *,
    creating: bool,
    category: Any = None,
    content: Any = None,
    gist: Any = None,
    salience: Any = None,
    core: Any = None,
    epistemic_status: Any = None,
    provenance: Any = None,
    tags: Any = None,
    linked_memories: Any = None,
    conversation_id: Any = None,
    transcript_ref: Any = None,
    conversation_url: Any = None,
    search_keywords: Any = None,
) -> tuple[dict[str, Any], list[str], list[str]]:
    """The draft's fields as given, the warnings reading them gave, and the links that are
    neither ids nor prefixes."""
    warnings: list[str] = []
    given = _texts(creating, category=category, content=content, gist=gist, warnings=warnings)
    given |= _settings(
        salience=salience, core=core, epistemic_status=epistemic_status, warnings=warnings
    )
    for name, value in (
        ("provenance", provenance),
        ("conversation_id", conversation_id),
        ("transcript_ref", transcript_ref),
        ("conversation_url", conversation_url),
    ):
        if value is not None:
            # Blank clears it: "" in the draft.
            given[name] = read.optional_text(value, field=name) or ""
    if tags is not None:
        given["tags"] = read.coerce_string_list(tags, field="tags")
    if search_keywords is not None:
        given["search_keywords"] = read.coerce_string_list(search_keywords, field="search_keywords")
    malformed: list[str] = []
    if linked_memories is not None:
        links = read.coerce_id_strings(
            linked_memories, field="linked_memories", max_items=MAX_LINKS
        )
        given["linked_memories"], malformed = _link_refs(links)
    if not creating and not given:
        raise InvalidInput(
            "Nothing to update: send update_id together with the fields to change "
            "(only those change)."
        )
    return given, warnings, malformed


def _texts(
    creating: bool, *, category: Any, content: Any, gist: Any, warnings: list[str]
) -> dict[str, Any]:
    """Category, content and gist as given; each is required when creating."""
    given: dict[str, Any] = {}
    if category is not None:
        given["category"] = _category(category, warnings)
    elif creating:
        raise InvalidInput(
            f"category is required when creating a memory: one of {', '.join(CATEGORY_VALUES)}."
        )
    if content is not None:
        why = "" if creating else "Leave content out to keep the memory's content as it is."
        given["content"] = read.require_text(content, field="content", limit=MAX_CONTENT, why=why)
    elif creating:
        raise InvalidInput(
            "content is required when creating a memory: the memory in full, as non-blank text."
        )
    if gist is not None:
        given["gist"] = read.require_text(
            read.trimmed(gist), field="gist", limit=MAX_GIST, why=GIST_WHY
        )
    elif creating:
        raise InvalidInput(f"gist is required when creating a memory. {GIST_WHY}")
    return given


def _settings(
    *,
    salience: Any,
    core: Any,
    epistemic_status: Any,
    warnings: list[str],
) -> dict[str, Any]:
    """Salience, core and epistemic status, as far as given."""
    given: dict[str, Any] = {}
    if salience is not None:
        given["salience"] = _salience(salience, warnings)
    if core is not None:
        given["core"] = read.coerce_bool(core, field="core")
    if epistemic_status is not None:
        given["epistemic_status"] = EpistemicStatus(read.coerce_epistemic_status(epistemic_status))
    return given


def _link_refs(links: list[str]) -> tuple[list[MemoryRef], list[str]]:
    """The links that are ids or prefixes (each once), and those that are neither."""
    refs: list[MemoryRef] = []
    malformed: list[str] = []
    for link in links:
        parsed = read.parse_memory_ref(link)
        if parsed is None:
            malformed.append(link)
        elif isinstance(parsed, str):
            if all(not (isinstance(r, IdPrefix) and r.hex == parsed) for r in refs):
                refs.append(IdPrefix(parsed, link))
        elif parsed not in refs:
            refs.append(parsed)
    return refs, malformed


def _remember_warnings(done: Remembered, malformed: list[str], links: list[MemoryRef]) -> list[str]:
    warnings: list[str] = []
    if done.skipped_links.ambiguous or done.skipped_links.unknown:
        sent = {ref.hex: ref.written for ref in links if isinstance(ref, IdPrefix)}
        warnings.append(skipped_prefixes("linked_memories", done.skipped_links, sent))
    dropped = [*malformed, *map(str, done.dropped_links)]
    if dropped:
        warnings.append(
            "linked_memories: dropped ids that are not your memories: " + ", ".join(dropped)
        )
    if done.duplicate is not None:
        warnings.append(
            f"A live memory with the same {done.duplicate.same} already exists: "
            f"{done.duplicate.memory_id}. If this is the same thing, update that one with "
            "update_id instead."
        )
    return warnings


# --- taproot_recall --------------------------------------------------------------------


def recall_filters(
    *,
    query: Any = None,
    category: Any = None,
    ids: Any = None,
    tags: Any = None,
    since: Any = None,
    limit: Any = None,
) -> tuple[RecallFilters, list[str]]:
    """The recall's arguments as filters, and the warnings reading them gave."""
    warnings: list[str] = []
    if query is not None:
        if not isinstance(query, str):
            raise InvalidInput(f"query must be text (got {shown(query)}).")
        read.check_length(query, field="query", limit=MAX_QUERY)
    clean_category = None
    if category is not None and not (isinstance(category, str) and not category.strip()):
        clean_category = _category(category, warnings)
    clean_ids = None
    prefixes: list[IdPrefix] = []
    if ids is not None:
        id_list = read.split_id_list(ids, field="ids", max_items=MAX_RECALL_IDS)
        clean_ids = id_list.ids
        prefixes = [IdPrefix(hex, str(sent)) for hex, sent in id_list.prefixes.items()]
        if id_list.malformed:
            # One bad entry must not cost the others: it is skipped, and named.
            strings = all(isinstance(item, str) for item in id_list.malformed)
            warnings.append(
                "Skipped entries of ids that are not memory ids "
                f"(send {'' if strings else 'each as a string: '}{read.ID_FORMAT}): "
                + ", ".join(shown(item) for item in id_list.malformed)
                + "."
            )
        elif not clean_ids and not prefixes:
            # An empty list (however encoded) asks for no particular ids: it does not filter.
            clean_ids = None
    tag_list = read.coerce_string_list(
        tags, field="tags", max_items=MAX_LIST_ITEMS, max_length=MAX_ITEM_LENGTH
    )
    # Blank text, like a blank category, is an argument left out (models send "").
    blank_since = since is None or (isinstance(since, str) and not since.strip())
    clean_since = None if blank_since else read.coerce_since(since)
    if limit is not None:
        clean_limit = read.coerce_int(limit, field="limit", minimum=1, maximum=MAX_RECALL_LIMIT)
    elif clean_ids or prefixes:
        clean_limit = len(clean_ids or []) + len(prefixes)
    else:
        clean_limit = DEFAULT_RECALL_LIMIT
    filters = RecallFilters(
        query=query,
        category=clean_category,
        ids=clean_ids,
        tags=tag_list,
        since=clean_since,
        limit=clean_limit,
        prefixes=prefixes,
    )
    return filters, warnings


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
    query: Any = None,
    category: Any = None,
    ids: Any = None,
    tags: Any = None,
    since: Any = None,
    limit: Any = None,
    now: datetime | None = None,
    query_vector: QueryVector | None = None,
) -> Reply:
    """`query_vector`: the query's, embedded ahead (mcp_bridge.embedding)."""
    filters, warnings = recall_filters(
        query=query, category=category, ids=ids, tags=tags, since=since, limit=limit
    )
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
        sent = {p.hex: p.written for p in filters.prefixes}
        warnings.append(skipped_prefixes("ids", found.prefixes, sent))
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
    return _warned(reply, warnings)


# --- taproot_promote -------------------------------------------------------------------


def _curation(core: Any, salience: Any, warnings: list[str]) -> tuple[bool | None, Salience | None]:
    if core is None and salience is None:
        raise InvalidInput("Give core (true or false) and/or salience (high, medium or low).")
    clean_core = None if core is None else read.coerce_bool(core, field="core")
    clean_salience = None if salience is None else _salience(salience, warnings)
    return clean_core, clean_salience


@speaking()
def promote(
    *,
    owner: User,
    memory_id: Any = None,
    core: Any = None,
    salience: Any = None,
    now: datetime | None = None,
) -> Reply:
    warnings: list[str] = []
    clean_core, clean_salience = _curation(core, salience, warnings)
    memory = services.promote(
        owner=owner,
        memory_id=read.memory_ref(memory_id),
        core=clean_core,
        salience=clean_salience,
        now=now,
    )
    return _warned(_curated(memory), warnings)


def _curated(memory: Memory) -> Reply:
    return {
        "status": "ok",
        "memory_id": str(memory.pk),
        "core": memory.core,
        "salience": memory.salience,
    }


# --- taproot_forget --------------------------------------------------------------------


@speaking()
def forget(
    *,
    owner: User,
    action: Any = None,
    memory_id: Any = None,
    reason: Any = None,
    ids: Any = None,
    content: Any = None,
    gist: Any = None,
    category: Any = None,
    now: datetime | None = None,
) -> Reply:
    """One entry point for the tool's four actions."""
    folded = action.strip().lower() if isinstance(action, str) else None
    if folded not in FORGET_ACTIONS:
        raise InvalidInput(
            f"action must be one of {', '.join(FORGET_ACTIONS)} (got {shown(action)})."
        )
    if folded == "compress":
        return compress(
            owner=owner,
            ids=ids,
            content=content,
            gist=gist,
            category=category,
            reason=reason,
            now=now,
        )
    if memory_id is None:
        raise InvalidInput(f"action {folded!r} needs memory_id: the id of one of your memories.")
    if folded == "archive":
        return archive(owner=owner, memory_id=memory_id, reason=reason, now=now)
    if folded == "unarchive":
        return unarchive(owner=owner, memory_id=memory_id, now=now)
    pk = services.delete(owner=owner, memory_id=read.memory_ref(memory_id))
    return {"status": "ok", "action": "deleted", "memory_id": str(pk)}


@speaking()
def archive(
    *, owner: User, memory_id: Any, reason: Any = None, now: datetime | None = None
) -> Reply:
    clean_reason = read.optional_text(reason, field="reason", limit=MAX_REASON)
    done = services.archive(
        owner=owner, memory_id=read.memory_ref(memory_id), reason=clean_reason, now=now
    )
    if not done.changed:
        return {
            "status": "ok",
            "action": "archived",
            "memory_id": str(done.memory.pk),
            "changed": False,
            "message": "This memory was already archived; nothing changed.",
        }
    return {
        "status": "ok",
        "action": "archived",
        "memory_id": str(done.memory.pk),
        "changed": True,
        "reason": clean_reason,
    }


@speaking()
def unarchive(*, owner: User, memory_id: Any, now: datetime | None = None) -> Reply:
    done = services.unarchive(owner=owner, memory_id=read.memory_ref(memory_id), now=now)
    reply: Reply = {
        "status": "ok",
        "action": "unarchived",
        "memory_id": str(done.memory.pk),
        "changed": done.changed,
    }
    if not done.changed:
        reply["message"] = "This memory is not archived; nothing changed."
    return reply


@speaking()
def compress(
    *,
    owner: User,
    ids: Any = None,
    content: Any = None,
    gist: Any = None,
    category: Any = None,
    reason: Any = None,
    now: datetime | None = None,
) -> Reply:
    """taproot_forget(action="compress")."""
    if ids is None:
        raise InvalidInput("compress needs ids: two or more of your live memory ids.")
    id_list = read.coerce_id_list(ids, field="ids", max_items=MAX_RECALL_IDS)
    try:
        warnings: list[str] = []
        clean_content = read.require_text(content, field="content", limit=MAX_CONTENT)
        clean_gist = read.require_text(read.trimmed(gist), field="gist", limit=MAX_GIST)
        clean_category = None if category is None else _category(category, warnings)
        clean_reason = read.optional_text(reason, field="reason", limit=MAX_REASON)
        done = services.compress(
            owner=owner,
            memory_ids=id_list.refs(),
            content=clean_content,
            gist=clean_gist,
            category=clean_category,
            reason=clean_reason,
            now=now,
        )
    except TooFewToCompress as too_few:
        need = say(too_few)
        if skipped := _skipped_ids(too_few.resolved, id_list.prefixes):
            need = f"{need} {skipped}"
        raise InvalidInput(need) from None
    if skipped := _skipped_ids(done.skipped, id_list.prefixes):
        warnings.insert(0, skipped)
    memory = done.memory
    reply = {
        "status": "ok",
        "action": "compressed",
        "memory_id": str(memory.pk),
        "archived": [str(m.pk) for m in done.originals],
        "category": memory.category,
        "salience": memory.salience,
        "core": memory.core,
        "compression_level": memory.compression_level,
    }
    return _warned(reply, warnings)


def _skipped_ids(resolved: Resolved, sent: Mapping[str, Any]) -> str:
    if resolved.ambiguous or resolved.unknown:
        return skipped_prefixes("ids", resolved, sent)
    return ""


# --- taproot_close, taproot_reflect, taproot_status, taproot_migrate --------------------


@speaking()
def close(
    *,
    owner: User,
    reflection: Any = None,
    conversation_title: Any = None,
    conversation_url: Any = None,
    now: datetime | None = None,
) -> Reply:
    text = read.require_text(read.trimmed(reflection), field="reflection", limit=MAX_REFLECTION)
    title = read.optional_text(conversation_title, field="conversation_title", limit=MAX_TITLE)
    url = read.optional_text(conversation_url, field="conversation_url")
    closed = services.close(
        owner=owner, reflection=text, conversation_title=title, conversation_url=url, now=now
    )
    reply: Reply = {
        "status": "ok",
        "action": "closed",
        "reflection_id": str(closed.closing.pk),
        "message": CLOSING_MESSAGE,
    }
    if closed.already_stored:
        reply["already_stored"] = True
    return reply


def status(*, owner: User, now: datetime | None = None) -> Reply:
    found = services.status(owner=owner, now=now)
    payload = found.payload
    omitted = found.catalog_omitted
    return {
        "status": "ok",
        "live_memories": found.live,
        "live_by_category": found.live_by_category,
        "archived": found.archived,
        "closings": found.closings,
        "core_count": payload.payload["core_count"],
        "catalog": {
            "included": payload.payload["catalog_count"],
            "omitted": omitted,
            "omitted_by_window": omitted - payload.cut_count,
            "cut_by_budget": payload.cut_count,
            "window_days": found.window_days,
        },
        "reflect_payload": {
            "bytes": payload.bytes,
            "kb": payload.kilobytes,
            "tokens": payload.tokens,
            "max_tokens": payload.max_tokens,
            "core_tokens": payload.core_tokens,
            "core_share_of_budget": round(payload.core_tokens / payload.max_tokens, 3),
            "core_in_full": len(payload.core_full),
            "core_as_lines": len(payload.core_lines),
            "core_omitted": payload.core_omitted,
        },
        "last_reflect_at": isoformat(found.history.last_at),
        "reflects_last_7_days": found.history.last_7_days,
        "suggestions": [group.as_status() for group in found.suggestions],
        "recall_by_meaning": found.meaning_model or "off: recall ranks by words alone",
        "warnings": payload.warnings,
    }


def migrate(*, owner: User) -> Mapping[str, Any]:
    # Always the token's user: the service migrates every user's store when owner is None.
    migrated = services.migrate(owner=owner)
    (mine,) = migrated.owners
    return {
        "status": "ok",
        "dry_run": migrated.dry_run,
        "migrated": migrated.migrated,
        "already_migrated": migrated.total - migrated.migrated,
        "total": migrated.total,
        "snapshot_id": mine.snapshot_id,
        "category_counts_before": migrated.counts_before,
        "category_counts_after": migrated.counts_after,
        "message": migrated.message,
    }
