"""Short ids (SPEC §5): a memory is shown by the shortest prefix of its id that no other
memory of its owner's shares, at least SHORT_ID_MIN hex characters, and every tool takes
such a prefix wherever it takes an id.

Both directions are one indexed query on the database-kept `id_prefix` column, however
large the store: the prefixes of 8 characters almost never collide (two in 100,000 random
ids are expected to share one), so only the colliding few are ever read in full.
"""

import uuid
from collections.abc import Iterable, Sequence

from memories.errors import AmbiguousPrefix, UnknownMemory
from memories.models import Memory, User
from memories.refs import MemoryRef, Resolved
from memories.vocabulary import SHORT_ID_MIN

# Where the canonical form of a UUID puts its hyphens, counted in hex characters.
_HYPHENS_AFTER = (8, 12, 16, 20)


def shown_prefix(memory_id: uuid.UUID, hex_digits: int) -> str:
    """The first `hex_digits` hex characters of an id, hyphens kept where the id has them."""
    hyphens = sum(hex_digits > position for position in _HYPHENS_AFTER)
    return str(memory_id)[: hex_digits + hyphens]


def _common_length(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def short_ids(owner: User | int, ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, str]:
    """Each id's shortest unique prefix among the owner's memories (one query).

    An id need not name a memory of the owner's (a link to a deleted one): it is shown by
    the prefix that tells it apart from those that exist.
    """
    wanted = set(ids)
    if not wanted:
        return {}
    prefixes = {i.hex[:SHORT_ID_MIN] for i in wanted}
    sharing = (
        Memory.objects.for_owner(owner)
        .sharing_id_prefixes(prefixes)
        .order_by()
        .values_list("id", flat=True)
    )
    neighbours: dict[str, list[str]] = {}
    for other in sharing:
        neighbours.setdefault(other.hex[:SHORT_ID_MIN], []).append(other.hex)
    result: dict[uuid.UUID, str] = {}
    for memory_id in wanted:
        mine = memory_id.hex
        others = [o for o in neighbours.get(mine[:SHORT_ID_MIN], ()) if o != mine]
        common = max((_common_length(mine, other) for other in others), default=0)
        result[memory_id] = shown_prefix(memory_id, max(SHORT_ID_MIN, common + 1))
    return result


def attach_short_ids(owner: User | int, memories: Iterable[Memory]) -> None:
    """Give these memories their short ids for display (`Memory.short_id`)."""
    memories = list(memories)
    found = short_ids(owner, (m.pk for m in memories))
    for memory in memories:
        memory._short_id = found[memory.pk]  # type: ignore[attr-defined]


# --- taking prefixes from the tools ------------------------------------------------------


def resolve_prefixes(owner: User | int, prefixes: Sequence[str]) -> Resolved:
    """The owner's memories each prefix (lowercase hex, at least SHORT_ID_MIN characters)
    names; archived ones included, as a full id would name them. One query."""
    if not prefixes:
        return Resolved()
    candidates = list(
        Memory.objects.for_owner(owner)
        .with_id_prefixes({p[:SHORT_ID_MIN] for p in prefixes})
        .order_by("id")
        .values_list("id", flat=True)
    )
    resolved = Resolved()
    for prefix in prefixes:
        matches = [c for c in candidates if c.hex.startswith(prefix)]
        if len(matches) == 1:
            resolved.ids[prefix] = matches[0]
        elif matches:
            resolved.ambiguous[prefix] = matches
        else:
            resolved.unknown.append(prefix)
    return resolved


def resolve_memory_id(owner: User, ref: MemoryRef) -> uuid.UUID:
    """The whole id a reference names: as given, or the one memory of the owner's whose id
    starts with the prefix given (UnknownMemory when none does, AmbiguousPrefix when
    several do)."""
    if isinstance(ref, uuid.UUID):
        return ref
    resolved = resolve_prefixes(owner, [ref.hex])
    if ref.hex in resolved.ids:
        return resolved.ids[ref.hex]
    if candidates := resolved.ambiguous.get(ref.hex):
        raise AmbiguousPrefix(ref, candidates)
    raise UnknownMemory(ref)
