"""Memory ids inside a memory's text fields as the dashboard shows them: an archive reason
such as "compressed into <whole id>" names the memory by its short id, linked to it."""

import re
import uuid
from collections.abc import Iterable
from dataclasses import dataclass

from memories.models import Memory, User
from memories.shortids import short_ids

WHOLE_ID = re.compile(
    r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.IGNORECASE
)


@dataclass(frozen=True)
class NotePart:
    """A piece of a note: plain text, or a memory's short id (`memory_id` set when it
    names one of the owner's memories, for the link)."""

    text: str
    memory_id: uuid.UUID | None = None


def _named(text: str | None) -> list[uuid.UUID]:
    return [uuid.UUID(found) for found in WHOLE_ID.findall(text or "")]


def _parts(text: str, shown: dict[uuid.UUID, str], existing: set[uuid.UUID]) -> list[NotePart]:
    parts: list[NotePart] = []
    end = 0
    for match in WHOLE_ID.finditer(text):
        pk = uuid.UUID(match.group())
        parts.append(NotePart(text[end : match.start()]))
        parts.append(NotePart(shown[pk], pk if pk in existing else None))
        end = match.end()
    parts.append(NotePart(text[end:]))
    return [part for part in parts if part.text]


def attach_display_ids(
    owner: User, memories: Iterable[Memory], *, also: Iterable[uuid.UUID] = ()
) -> dict[uuid.UUID, str]:
    """Give these memories their short ids (`short_id`) and their archive reasons as note
    parts (`archive_note`): one query, and one more only when a reason names an id. The
    short ids of `also` come with them, returned (with all the others)."""
    memories = list(memories)
    named = {pk for memory in memories for pk in _named(memory.archive_reason)}
    shown = short_ids(owner, [*(memory.pk for memory in memories), *named, *also])
    existing: set[uuid.UUID] = set()
    if named:
        mine = Memory.objects.for_owner(owner).filter(pk__in=named)
        existing = set(mine.values_list("pk", flat=True))
    for memory in memories:
        memory._short_id = shown[memory.pk]  # type: ignore[attr-defined]
        reason = memory.archive_reason or ""
        memory.archive_note = _parts(reason, shown, existing)  # type: ignore[attr-defined]
    return shown
