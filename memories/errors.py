"""Why a service refused. Services raise these before they change anything, so a refused
call changes nothing.

A `DomainError` carries what went wrong as data (the memory, the field, the limit), not
as a message for one reader: each interface words it for its own (mcp_bridge.messages for
Claude, dashboard.messages for a person), and `str()` gives a plain sentence for the
operator's tools (the admin, the management commands). `InvalidInput` is the one refusal
that is already a sentence: an import file that cannot be read, or a tool argument that
cannot be turned into a value (mcp_bridge.coercion), says what to fix in its own words.
"""

import uuid
from collections.abc import Sequence

from memories.quoting import shown
from memories.refs import IdPrefix, MemoryRef, Resolved


class Refused(Exception):
    """A call refused before it changed anything."""


class InvalidInput(Refused):
    """The caller's input cannot be used. The message says what is wrong and how to fix it."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ImportRunning(InvalidInput):
    """The account has an import (or a dry run) running already."""

    def __init__(self) -> None:
        super().__init__(
            "An import into this account is still running (from the Import page or the "
            "command line). Wait for it to finish, then try again; nothing was changed."
        )


class ImportBusy(InvalidInput):
    """The worker runs as many imports as it takes at once."""

    def __init__(self) -> None:
        super().__init__(
            "The server is busy with other imports. Try again in a minute; nothing was changed."
        )


class DomainError(Refused):
    """A refusal that carries data; see the module's docstring."""

    def __init__(self, description: str) -> None:
        super().__init__(description)


class UnknownMemory(DomainError):
    """No memory of the owner's has this id (a foreign id is as unknown as a made-up one)."""

    def __init__(self, ref: MemoryRef) -> None:
        self.ref = ref
        super().__init__(f"No memory with id {ref} exists for this user.")


class AmbiguousPrefix(DomainError):
    """An id prefix that starts the ids of several of the owner's memories."""

    def __init__(self, prefix: IdPrefix, candidates: Sequence[uuid.UUID]) -> None:
        self.prefix = prefix
        self.candidates = list(candidates)
        super().__init__(
            f"{prefix} starts the ids of {len(self.candidates)} memories: "
            + ", ".join(map(str, self.candidates))
            + "."
        )


class MemoryArchived(DomainError):
    """The change needs a live memory, and this one is archived."""

    def __init__(self, memory_id: uuid.UUID, change: str) -> None:
        self.memory_id = memory_id
        self.change = change  # what was refused, as a verb: "promote", "update"
        super().__init__(f"Memory {memory_id} is archived; unarchive it to {change} it.")


class BlankText(DomainError):
    """A text the memory needs is missing or blank."""

    def __init__(self, field: str) -> None:
        self.field = field
        super().__init__(f"{field} must be non-blank text.")


class LimitExceeded(DomainError):
    """A text longer than its limit (SPEC §2): nothing is ever truncated."""

    def __init__(self, field: str, limit: int, got: int) -> None:
        self.field = field
        self.limit = limit
        self.got = got
        super().__init__(f"{field} is {got:,} characters; the limit is {limit:,}.")


class Unstorable(DomainError):
    """A text holding a character no database can store."""

    def __init__(self, field: str, problem: str) -> None:
        self.field = field
        self.problem = problem  # what it holds, said for a message
        super().__init__(f"{field} contains {problem} which cannot be stored.")


class TooManyItems(DomainError):
    """A list (tags, keywords, links) with more entries than a memory may hold."""

    def __init__(self, field: str, limit: int, got: int) -> None:
        self.field = field
        self.limit = limit
        self.got = got
        super().__init__(f"{field} may hold at most {limit} entries ({got} given).")


class NothingToChange(DomainError):
    """An edit that names no field to change."""

    def __init__(self) -> None:
        super().__init__("Nothing to change was given.")


class TooFewToCompress(DomainError):
    """Compressing needs at least two distinct memories."""

    def __init__(self, found: int, resolved: Resolved | None = None) -> None:
        self.found = found
        self.resolved = resolved or Resolved()  # what the prefixes given named
        super().__init__(f"Compressing needs at least two distinct memories ({found} found).")


class NotAllYours(DomainError):
    """Some ids to compress name no memory of the owner's."""

    def __init__(self, ids: Sequence[uuid.UUID]) -> None:
        self.ids = list(ids)
        super().__init__("Unknown memories: " + ", ".join(map(str, self.ids)) + ".")


class SomeArchived(DomainError):
    """Some memories to compress are archived."""

    def __init__(self, ids: Sequence[uuid.UUID]) -> None:
        self.ids = list(ids)
        super().__init__("These memories are archived: " + ", ".join(map(str, self.ids)) + ".")


class MixedCategories(DomainError):
    """Memories of several categories compressed without saying the new one's."""

    def __init__(self, categories: Sequence[str]) -> None:
        self.categories = sorted(categories)
        super().__init__(
            "The memories are in different categories (" + ", ".join(self.categories) + ")."
        )


class TooManyTags(DomainError):
    """Memories whose tags together are more than one memory may hold."""

    def __init__(self, got: int, limit: int) -> None:
        self.got = got
        self.limit = limit
        super().__init__(f"Together the memories carry {got} distinct tags; the limit is {limit}.")


class UnknownRevision(DomainError):
    """No revision of the owner's has this id."""

    def __init__(self, ref: object) -> None:
        self.ref = ref  # as given
        super().__init__(f"No revision {shown(ref)} exists for this user.")


class SuggestionStale(DomainError):
    """A suggestion applied after its rule stopped picking the memory, or after it was
    dismissed: the memory changed since the suggestion was listed."""

    def __init__(self, memory_id: uuid.UUID, kind: str, *, dismissed: bool) -> None:
        self.memory_id = memory_id
        self.kind = kind  # "promote", "demote" or "archive"
        self.dismissed = dismissed
        why = "was dismissed" if dismissed else "no longer holds"
        super().__init__(f"The suggestion to {kind} memory {memory_id} {why}; nothing changed.")


class RestoreOutdated(DomainError):
    """A revision restore confirmed after the memory changed since it was previewed: it
    would not apply what was shown."""

    def __init__(self, revision_id: int, memory_id: uuid.UUID) -> None:
        self.revision_id = revision_id
        self.memory_id = memory_id
        super().__init__(
            f"Memory {memory_id} changed after the restore of revision {revision_id} was "
            "previewed; nothing was restored."
        )


class OperatorRefusal(DomainError):
    """A refusal only the operator's tools meet (restoring a snapshot is for the admin and
    the commands, never for Claude or the dashboard), so only str() words it."""


class UnknownSnapshot(OperatorRefusal):
    """No snapshot (of the owner's, when an owner asks) has this id."""

    def __init__(self, snapshot_id: int) -> None:
        self.snapshot_id = snapshot_id
        super().__init__(f"No snapshot {snapshot_id} exists.")


class UnreadableSnapshot(OperatorRefusal):
    """A snapshot whose records are not a snapshot document (damaged by hand, say)."""

    def __init__(self, snapshot_id: int, problem: str) -> None:
        self.snapshot_id = snapshot_id
        self.problem = problem
        super().__init__(f"Snapshot {snapshot_id} cannot be read ({problem}); nothing was changed.")


class SnapshotInProgress(OperatorRefusal):
    """The snapshot of an import still writing: it is complete once the import is."""

    def __init__(self, snapshot_id: int) -> None:
        self.snapshot_id = snapshot_id
        super().__init__(
            f"Snapshot {snapshot_id} belongs to an import that is still running; restore it "
            "once the import has finished. Nothing was changed."
        )


class SnapshotRecordTaken(OperatorRefusal):
    """A record the snapshot would put back now belongs to another user."""

    def __init__(self, snapshot_id: int, kind: str, record_id: uuid.UUID) -> None:
        self.snapshot_id = snapshot_id
        self.kind = kind  # "memory" or "closing"
        self.record_id = record_id
        super().__init__(
            f"Snapshot {snapshot_id} cannot be restored: {kind} {record_id} now belongs to "
            "another user. Nothing was changed."
        )
