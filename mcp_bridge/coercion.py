"""Tool arguments as models send them, turned into the values the services take (SPEC §2,
§4): legacy names and numeric saliences translated (with a warning), "true" and "yes" read
as true, lists sent as JSON text or a bare string read as lists, ids and their prefixes
told apart.

Pure functions: each takes what a caller sent and returns the clean value, or raises
InvalidInput with a message that says what to send instead. The limits themselves are the
domain's (memories.limits); a value over one is refused here in the tools' words.
"""

import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from mcp_bridge.messages import say
from memories import limits
from memories.errors import DomainError, InvalidInput
from memories.jsonutil import json_list
from memories.limits import MAX_ITEM_LENGTH, MAX_LIST_ITEMS, MAX_REFERENCE
from memories.quoting import shown
from memories.refs import IdPrefix, MemoryRef
from memories.timeutil import parse_timestamp
from memories.vocabulary import (
    CATEGORY_VALUES,
    EPISTEMIC_VALUES,
    LEGACY_CATEGORIES,
    NUMERIC_SALIENCE,
    SALIENCE_VALUES,
    SHORT_ID_MIN,
    whole_number,
)


def _folded(value: object) -> str | None:
    return value.strip().lower() if isinstance(value, str) else None


def _allowed(values: Iterable[str]) -> str:
    return ", ".join(values)


def coerce_category(value: object, *, field: str = "category") -> tuple[str, str | None]:
    """Canonical category and a warning when a legacy name was translated."""
    folded = _folded(value)
    if folded in CATEGORY_VALUES:
        return folded, None
    if folded in LEGACY_CATEGORIES:
        canonical = LEGACY_CATEGORIES[folded]
        return canonical, f"{field} {shown(value)} is a legacy name; stored as {canonical!r}."
    raise InvalidInput(f"{field} must be one of {_allowed(CATEGORY_VALUES)} (got {shown(value)}).")


def coerce_salience(value: object, *, field: str = "salience") -> tuple[str, str | None]:
    """Canonical salience and a warning when a numeric one ("3", "2", "1") was translated."""
    if isinstance(value, int) and not isinstance(value, bool):
        value_text: object = str(value)
    else:
        value_text = value
    folded = _folded(value_text)
    if folded in SALIENCE_VALUES:
        return folded, None
    if folded in NUMERIC_SALIENCE:
        canonical = NUMERIC_SALIENCE[folded]
        return canonical, f"{field} {shown(value)} is numeric; stored as {canonical!r}."
    raise InvalidInput(f"{field} must be one of {_allowed(SALIENCE_VALUES)} (got {shown(value)}).")


def coerce_epistemic_status(value: object) -> str:
    folded = _folded(value)
    if folded in EPISTEMIC_VALUES:
        return folded
    raise InvalidInput(
        f"epistemic_status must be one of {_allowed(EPISTEMIC_VALUES)} (got {shown(value)})."
    )


def coerce_bool(value: object, *, field: str) -> bool:
    if isinstance(value, bool):
        return value
    folded = _folded(value)
    if folded in {"true", "yes", "1"}:
        return True
    if folded in {"false", "no", "0"}:
        return False
    raise InvalidInput(f"{field} must be true or false (got {shown(value)}).")


def coerce_int(value: object, *, field: str, minimum: int, maximum: int) -> int:
    if isinstance(value, bool):
        number = None
    elif isinstance(value, int):
        number = value
    elif isinstance(value, float) and value.is_integer():
        number = int(value)
    elif isinstance(value, str):
        number = whole_number(value)
    else:
        number = None
    if number is None or not minimum <= number <= maximum:
        raise InvalidInput(
            f"{field} must be a whole number from {minimum} to {maximum} (got {shown(value)})."
        )
    return number


def require_text(value: object, *, field: str, limit: int, why: str = "") -> str:
    """A non-blank string of at most `limit` characters (kept as written)."""
    if not isinstance(value, str) or not value.strip():
        hint = f" {why}" if why else ""
        raise InvalidInput(f"{field} is required and must be non-blank text.{hint}")
    return check_length(value, field=field, limit=limit)


def trimmed(value: object) -> object:
    """Text without surrounding white space (which is no part of a gist, nor of its length);
    anything else unchanged, for the checks to refuse."""
    return value.strip() if isinstance(value, str) else value


def check_length(value: str, *, field: str, limit: int) -> str:
    """Text that fits its limit and can be stored, refused in the tools' words."""
    try:
        return limits.check_length(value, field=field, limit=limit)
    except DomainError as error:
        raise InvalidInput(say(error)) from None


def optional_text(value: object, *, field: str, limit: int = MAX_REFERENCE) -> str | None:
    """An optional string; blank means "none"."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidInput(f"{field} must be text (got {shown(value)}).")
    if not value.strip():
        return None
    return check_length(value.strip(), field=field, limit=limit)


def parse_list_argument(value: object) -> list[Any]:
    """A list as models send it: a real list, a JSON-encoded list, or one bare string."""
    if isinstance(value, list | tuple):
        return list(value)
    if isinstance(value, str):
        text = value.strip()
        parsed = json_list(text)
        if parsed is not None:
            return parsed
        return [value] if text else []
    raise InvalidInput("expected a list of strings")


def coerce_string_list(
    value: object, *, field: str, max_items: int = MAX_LIST_ITEMS, max_length: int = MAX_ITEM_LENGTH
) -> list[str]:
    """A list of distinct non-blank strings within the limits of SPEC §2."""
    if value is None:
        return []
    try:
        items = parse_list_argument(value)
    except InvalidInput:
        raise InvalidInput(f"{field} must be a list of strings (got {shown(value)}).") from None
    result: list[str] = []
    seen: set[str] = set()  # a set: the list may be long before the count refuses it
    for item in items:
        if not isinstance(item, str):
            raise InvalidInput(f"{field} must contain only strings (found {shown(item)}).")
        text = item.strip()
        if not text:
            continue
        check_length(text, field=f"each entry of {field}", limit=10**9)
        if len(text) > max_length:
            raise InvalidInput(
                f"each entry of {field} may be at most {max_length} characters (got {shown(text)})."
            )
        if text not in seen:
            seen.add(text)
            result.append(text)
    if len(result) > max_items:
        raise InvalidInput(f"{field} may hold at most {max_items} entries (got {len(result)}).")
    return result


_HEX_DIGITS = frozenset("0123456789abcdef")
_UUID_HEX_LENGTH = 32
# Longer than any way of writing an id (a whole one, with hyphens and catalog brackets).
MAX_ID_TEXT = 100
ID_FORMAT = (
    f"the id of one of your memories, as shown in the catalog (its first {SHORT_ID_MIN} or "
    "more characters) or whole"
)


# The most digits a whole id written out without hyphens has; a longer number is no id.
_MAX_ID_NUMBER = 10**_UUID_HEX_LENGTH


def id_text(value: object) -> object:
    """An id as models send it: a JSON number that is all digits is read as its digits (the
    MCP Inspector sends a short id such as 12345678 so); anything else is returned as sent.
    A negative or fractional number is not all digits and stays a number."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < _MAX_ID_NUMBER:
        return str(value)
    return value


def parse_memory_ref(value: object) -> uuid.UUID | str | None:
    """A memory id as a tool may send it: the whole id (a UUID), or a prefix of at least
    SHORT_ID_MIN hex characters (hyphens, and the brackets of a catalog line, ignored),
    returned as lowercase hex; an all-digit number counts as its digits (id_text). None
    when it is neither."""
    if isinstance(value, uuid.UUID):
        return value
    value = id_text(value)
    if not isinstance(value, str):
        return None
    text = value.strip().strip("[]").strip()
    try:
        return uuid.UUID(text)
    except ValueError:
        pass
    digits = text.replace("-", "").lower()
    if SHORT_ID_MIN <= len(digits) < _UUID_HEX_LENGTH and set(digits) <= _HEX_DIGITS:
        return digits
    return None


def not_an_id(value: object, *, field: str) -> InvalidInput:
    """The refusal of a value that parse_memory_ref could not read as an id; one sent as
    something other than text is told that ids are strings."""
    if isinstance(value, str):
        return InvalidInput(f"{field} must be {ID_FORMAT} (got {shown(value)}).")
    return InvalidInput(f"{field} must be a string: {ID_FORMAT} (got {shown(value)}).")


def coerce_memory_id(value: object, *, field: str = "memory_id") -> uuid.UUID:
    """A whole memory id (a UUID)."""
    memory_id = coerce_memory_ref(value, field=field)
    if not isinstance(memory_id, uuid.UUID):
        raise InvalidInput(f"{field} must be a whole memory id, a UUID (got {shown(value)}).")
    return memory_id


def coerce_memory_ref(value: object, *, field: str = "memory_id") -> uuid.UUID | str:
    """A memory id or a prefix of one (see parse_memory_ref); the caller resolves a prefix."""
    if value is None:
        raise InvalidInput(f"{field} is required: {ID_FORMAT}.")
    memory_ref = parse_memory_ref(value)
    if memory_ref is None:
        raise not_an_id(value, field=field)
    return memory_ref


def memory_ref(value: object, *, field: str = "memory_id") -> MemoryRef:
    """A memory id, or a prefix of one that keeps how it was sent (to quote it back)."""
    ref = coerce_memory_ref(value, field=field)
    if isinstance(ref, uuid.UUID):
        return ref
    return IdPrefix(ref, value if isinstance(value, str) else str(value))


def id_items(value: object, *, field: str) -> list[Any]:
    """The entries of a list argument of memory ids, as sent (see parse_list_argument); an
    all-digit number, like a bare string, is a list of one."""
    try:
        return parse_list_argument(id_text(value))
    except InvalidInput:
        raise InvalidInput(
            f"{field} must be a list of memory ids, each a string (got {shown(value)})."
        ) from None


def coerce_id_strings(value: object, *, field: str, max_items: int) -> list[str]:
    """A list argument of memory ids as distinct non-blank strings, entries sent as
    all-digit numbers read as their digits (id_text); for a caller that judges each entry
    itself."""
    if value is None:
        return []
    items = [id_text(item) for item in id_items(value, field=field)]
    return coerce_string_list(items, field=field, max_items=max_items, max_length=MAX_ID_TEXT)


@dataclass(frozen=True)
class IdList:
    """The entries of a list argument of memory ids, sorted by what they are."""

    ids: list[uuid.UUID]  # whole ids, distinct, in the order given
    prefixes: dict[str, Any]  # each distinct prefix (lowercase hex) → the entry as sent
    malformed: list[Any]  # neither

    def refs(self) -> list[MemoryRef]:
        """The ids and prefixes, as the services take them."""
        prefixes = [IdPrefix(hex, str(sent)) for hex, sent in self.prefixes.items()]
        return [*self.ids, *prefixes]


def split_id_list(value: object, *, field: str, max_items: int) -> IdList:
    """The distinct memory ids and prefixes of a list argument, and its entries that are
    neither.

    For a caller that skips what names no memory instead of refusing the whole list; blank
    and null entries are left out, and only the list itself, or its length, is refused.
    """
    items = id_items(value, field=field)
    ids: dict[uuid.UUID, None] = {}  # a dict: distinct, in the order given
    prefixes: dict[str, Any] = {}
    malformed: list[Any] = []
    for item in items:
        if item is None or (isinstance(item, str) and not item.strip()):
            continue
        memory_ref = parse_memory_ref(item)
        if memory_ref is None:
            if not (isinstance(item, str) and item in malformed):
                malformed.append(item)
        elif isinstance(memory_ref, uuid.UUID):
            ids[memory_ref] = None
        else:
            prefixes.setdefault(memory_ref, item)
        if len(ids) + len(prefixes) + len(malformed) > max_items:
            count = len(items)
            raise InvalidInput(f"{field} may hold at most {max_items} entries (got {count}).")
    return IdList(list(ids), prefixes, malformed)


def coerce_id_list(value: object, *, field: str, max_items: int) -> IdList:
    """Like split_id_list, but an entry that is not an id (nor a prefix) refuses the list."""
    id_list = split_id_list(value, field=field, max_items=max_items)
    if id_list.malformed:
        raise not_an_id(id_list.malformed[0], field=f"each entry of {field}")
    return id_list


def coerce_since(value: object) -> datetime:
    text = value.isoformat() if isinstance(value, datetime) else value
    if isinstance(text, str) and text.strip():
        try:
            return parse_timestamp(text)
        except (ValueError, OverflowError):  # Overflow: a zone pushes it past year 1 or 9999
            pass
    raise InvalidInput(
        f"since must be an ISO-8601 date-time such as 2026-01-31T00:00:00Z (got {shown(value)})."
    )
