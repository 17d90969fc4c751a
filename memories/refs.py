"""How the services are told which memory: by its whole id, or by the start of it."""

import uuid
from dataclasses import dataclass, field


@dataclass(frozen=True)
class IdPrefix:
    """The start of a memory id (at least SHORT_ID_MIN lowercase hex characters, without
    hyphens; memories.shortids resolves it), and how it was written, to quote it back."""

    hex: str
    written: str = ""

    def __str__(self) -> str:
        return self.written or self.hex


MemoryRef = uuid.UUID | IdPrefix


@dataclass(frozen=True)
class Resolved:
    """What a list of prefixes names among the owner's memories."""

    ids: dict[str, uuid.UUID] = field(default_factory=dict)  # prefix → its one memory
    ambiguous: dict[str, list[uuid.UUID]] = field(default_factory=dict)  # prefix → candidates
    unknown: list[str] = field(default_factory=list)
