"""The services' refusals and findings in the words the tools use with Claude: what went
wrong, and the tool call that fixes it. The dashboard words the same errors for a person
(dashboard.messages)."""

import uuid
from collections.abc import Iterable, Mapping

from memories.errors import (
    AmbiguousPrefix,
    BlankText,
    DomainError,
    LimitExceeded,
    MemoryArchived,
    MixedCategories,
    NotAllYours,
    NothingToChange,
    SomeArchived,
    TooFewToCompress,
    TooManyItems,
    TooManyTags,
    UnknownMemory,
    UnknownRevision,
    Unstorable,
)
from memories.quoting import shown
from memories.refs import IdPrefix, Resolved

FIND_IT = "Check the id in the catalog, or find it with taproot_recall(query=...)."
_PAST = {"promote": "promoted", "update": "updated"}


def say(error: DomainError, *, field: str = "memory_id") -> str:
    """The refusal as a tool reply's message. `field` names the argument that held the id,
    for an id prefix that names several memories."""
    return _about_memories(error, field) or _about_values(error) or str(error)


def _about_memories(error: DomainError, field: str) -> str | None:
    match error:
        case UnknownMemory(ref=IdPrefix() as prefix):
            return f"No memory of yours has an id starting with {shown(prefix.written)}. {FIND_IT}"
        case UnknownMemory(ref=ref):
            return f"No memory with id {ref} exists for you. {FIND_IT}"
        case AmbiguousPrefix(prefix=prefix, candidates=candidates):
            return (
                f"{field} {shown(prefix.written)} is the start of {len(candidates)} of your "
                "memories' ids: "
                + ", ".join(map(str, candidates))
                + ". Send more characters of the one you mean, or its whole id."
            )
        case MemoryArchived(memory_id=memory_id, change=change):
            return (
                f"Memory {memory_id} is archived and cannot be {_PAST.get(change, change)}; "
                "unarchive it first with taproot_forget(action='unarchive')."
            )
        case TooFewToCompress():
            return "compress needs at least two distinct memory ids in ids."
        case NotAllYours(ids=ids):
            return "compress can only combine your own memories; unknown ids: " + _ids(ids)
        case SomeArchived(ids=ids):
            return "compress combines live memories; these are archived: " + _ids(ids)
        case UnknownRevision(ref=ref):
            return f"No revision {shown(ref)} exists for you."
    return None


def _about_values(error: DomainError) -> str | None:
    match error:
        case BlankText(field=name):
            return f"{name} is required and must be non-blank text."
        case LimitExceeded(field=name, limit=limit, got=got):
            return (
                f"{name} is {got:,} characters; the limit is {limit:,}. "
                "Shorten it (nothing is truncated for you)."
            )
        case Unstorable(field=name, problem=problem):
            return (
                f"{name} contains {problem} which cannot be stored. Remove it and send the "
                "text again."
            )
        case TooManyItems(field=name, limit=limit, got=got):
            return f"{name} may hold at most {limit} entries (got {got})."
        case NothingToChange():
            return "Nothing to change: send the fields to change with the memory's id."
        case MixedCategories(categories=categories):
            return (
                "These memories are in different categories ("
                + ", ".join(categories)
                + "): give the category of the compressed memory."
            )
        case TooManyTags(got=got, limit=limit):
            return (
                f"Together these memories carry {got} distinct tags; a memory may hold "
                f"{limit}. Remove some tags first."
            )
    return None


def _ids(ids: Iterable[uuid.UUID]) -> str:
    return ", ".join(map(str, ids))


def skipped_prefixes(field_name: str, resolved: Resolved, sent: Mapping[str, object]) -> str:
    """One warning naming the entries of a list argument that were skipped because their
    prefix names no memory, or several (with the candidates). `sent` maps each prefix to
    the value as the caller wrote it."""
    parts = [
        f"{shown(sent[p])} matches {len(ids)} of your memories ({', '.join(map(str, ids))})"
        for p, ids in resolved.ambiguous.items()
    ]
    parts += [f"{shown(sent[p])} matches none of your memories" for p in resolved.unknown]
    return (
        f"Skipped entries of {field_name} that name no single memory: "
        + "; ".join(parts)
        + ". Send more characters of an ambiguous id, or the whole id."
    )
