"""The services' refusals as a person reads them in the dashboard: plain sentences about
the memory in front of them, with no tool names and no ids (the card says which memory)."""

from memories.errors import (
    BlankText,
    DomainError,
    LimitExceeded,
    MemoryArchived,
    NothingToChange,
    RestoreOutdated,
    SuggestionStale,
    UnknownMemory,
    UnknownRevision,
    Unstorable,
)

_PAST = {"promote": "promoted", "update": "changed"}
# What a suggestion would have done, as "no longer suggested to …" ends.
_SUGGESTED = {
    "promote": "move it into the core tier",
    "demote": "move it out of the core tier",
    "archive": "archive it",
}


def say(error: DomainError) -> str:
    match error:
        case UnknownMemory():
            return "This memory no longer exists: it was deleted, perhaps in another window."
        case MemoryArchived(change=change):
            return (
                f"This memory is archived, so it cannot be {_PAST.get(change, change)}. "
                "Unarchive it first."
            )
        case BlankText(field=field):
            return f"The {field} cannot be empty."
        case LimitExceeded(field=field, limit=limit, got=got):
            return f"The {field} is {got:,} characters long; it can be at most {limit:,}."
        case Unstorable(field=field, problem=problem):
            return (
                f"The {field} contains {problem.rstrip(',')}, which cannot be stored. "
                "Remove it and save again."
            )
        case NothingToChange():
            return "Nothing was changed: choose what to change first."
        case UnknownRevision():
            return "This revision no longer exists."
        case SuggestionStale(kind=kind, dismissed=True):
            return (
                f"Nothing was changed: the suggestion to {_SUGGESTED.get(kind, kind)} was "
                "dismissed, perhaps in another window."
            )
        case SuggestionStale(kind=kind):
            return (
                f"Nothing was changed: this memory is no longer suggested to "
                f"{_SUGGESTED.get(kind, kind)}. It changed since the suggestions were shown; "
                "they are up to date now."
            )
        case RestoreOutdated():
            return (
                "Nothing was restored: this memory changed after you looked (perhaps in "
                "another window, or Claude changed it). Here is what restoring would change now."
            )
    return "This change could not be made. Reload the page and try again."
