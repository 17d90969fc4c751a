"""The rules for values coming in from any interface (SPEC §2, §4, §7).

Pure functions: each takes what a caller sent and returns the clean value, or raises
InvalidInput with a message that says what to send instead.
"""

import json
import math
import reprlib
import uuid
from collections.abc import Iterable, Sized
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from memories.errors import InvalidInput
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

MAX_CONTENT = 20_000
MAX_GIST = 300
MAX_LIST_ITEMS = 50
MAX_ITEM_LENGTH = 100
MAX_LINKS = 50
MAX_REFLECTION = 10_000
MAX_TITLE = 200
MAX_REASON = 1_000
# Not limited by the spec; bounded so one call cannot store megabytes in a side field.
MAX_REFERENCE = 2_000
MAX_RECALL_IDS = 50
# Not limited by the spec; a query is a handful of words, and a bound keeps the index
# lookup (one parameter per distinct token) far inside every backend's limits.
MAX_QUERY = 10_000
MAX_RECALL_LIMIT = 50
DEFAULT_RECALL_LIMIT = 5
# How much of a sent value a message quotes back: enough to recognise it, never megabytes.
ECHO_LIMIT = 80
# For values that are not text: a few entries of a few levels, never the repr of them all
# (which could be megabytes long, or nested too deep to repr at all).
_ECHO_ENTRIES = 5


class _EchoRepr(reprlib.Repr):
    """reprlib's short repr, with null, true and false as the caller wrote them in JSON.

    reprlib finds these methods by the name of the value's type.
    """

    def repr_NoneType(self, value: None, level: int) -> str:
        return "null"

    def repr_bool(self, value: bool, level: int) -> str:
        return "true" if value else "false"

    def repr_int(self, value: int, level: int) -> str:
        if value.bit_length() > 256:
            # Python refuses to turn an int of more than 4,300 digits into text at all.
            digits = math.ceil(value.bit_length() * math.log10(2))
            return f"a number of about {digits:,} digits"
        return repr(value)


_ECHO_REPR = _EchoRepr(
    maxlevel=3,
    maxtuple=_ECHO_ENTRIES,
    maxlist=_ECHO_ENTRIES,
    maxdict=_ECHO_ENTRIES,
    maxset=_ECHO_ENTRIES,
    maxfrozenset=_ECHO_ENTRIES,
    maxstring=ECHO_LIMIT,
    maxother=ECHO_LIMIT,
)


def shown(value: object) -> str:
    """A value the caller sent, as a message quotes it: its repr, or when that is longer
    than ECHO_LIMIT characters (or a list of more than a few entries), its start, an
    ellipsis and the whole value's size.

    Missing, null, true and false read as the caller knows them, not as Python's None,
    True and False.
    """
    if value is None:
        return "nothing"
    if isinstance(value, str):
        text = repr(value[: ECHO_LIMIT + 1])  # the start only: a value may be megabytes
        if len(text) <= ECHO_LIMIT:
            return text
        return f"{text[:ECHO_LIMIT]}… ({len(value):,} characters)"
    text = _ECHO_REPR.repr(value)
    cut = len(text) > ECHO_LIMIT
    if cut:
        text = text[:ECHO_LIMIT] + "…"
    if isinstance(value, Sized) and (cut or len(value) > _ECHO_ENTRIES):
        count = len(value)
        return f"{text} ({count:,} {'entry' if count == 1 else 'entries'})"
    return text


def _folded(value: Any) -> str | None:
    return value.strip().lower() if isinstance(value, str) else None


def _allowed(values: Iterable[str]) -> str:
    return ", ".join(values)


def coerce_category(value: Any, *, field: str = "category") -> tuple[str, str | None]:
    """Canonical category and a warning when a legacy name was translated."""
    folded = _folded(value)
    if folded in CATEGORY_VALUES:
        return folded, None
    if folded in LEGACY_CATEGORIES:
        canonical = LEGACY_CATEGORIES[folded]
        return canonical, f"{field} {shown(value)} is a legacy name; stored as {canonical!r}."
    raise InvalidInput(f"{field} must be one of {_allowed(CATEGORY_VALUES)} (got {shown(value)}).")


def coerce_salience(value: Any, *, field: str = "salience") -> tuple[str, str | None]:
    """Canonical salience and a warning when a numeric one ("3", "2", "1") was translated."""
    if isinstance(value, int) and not isinstance(value, bool):
        value_text: Any = str(value)
    else:
        value_text = value
    folded = _folded(value_text)
    if folded in SALIENCE_VALUES:
        return folded, None
    if folded in NUMERIC_SALIENCE:
        canonical = NUMERIC_SALIENCE[folded]
        return canonical, f"{field} {shown(value)} is numeric; stored as {canonical!r}."
    raise InvalidInput(f"{field} must be one of {_allowed(SALIENCE_VALUES)} (got {shown(value)}).")


def coerce_epistemic_status(value: Any) -> str:
    folded = _folded(value)
    if folded in EPISTEMIC_VALUES:
        return folded
    raise InvalidInput(
        f"epistemic_status must be one of {_allowed(EPISTEMIC_VALUES)} (got {shown(value)})."
    )


def coerce_bool(value: Any, *, field: str) -> bool:
    if isinstance(value, bool):
        return value
    folded = _folded(value)
    if folded in {"true", "yes", "1"}:
        return True
    if folded in {"false", "no", "0"}:
        return False
    raise InvalidInput(f"{field} must be true or false (got {shown(value)}).")


def coerce_int(value: Any, *, field: str, minimum: int, maximum: int) -> int:
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


def require_text(value: Any, *, field: str, limit: int, why: str = "") -> str:
    """A non-blank string of at most `limit` characters (kept as written)."""
    if not isinstance(value, str) or not value.strip():
        hint = f" {why}" if why else ""
        raise InvalidInput(f"{field} is required and must be non-blank text.{hint}")
    return check_length(value, field=field, limit=limit)


def trimmed(value: Any) -> Any:
    """Text without surrounding white space (which is no part of a gist, nor of its length);
    anything else unchanged, for the checks to refuse."""
    return value.strip() if isinstance(value, str) else value


def unstorable(value: str) -> str | None:
    """What in this text no database can store, said for a message; None when nothing.

    PostgreSQL text cannot hold NUL, and no database takes a lone UTF-16 surrogate
    (JSON allows the escape "\\ud800", but it is half a character).
    """
    if "\x00" in value:
        return "the NUL character (\\u0000),"
    if not value.isascii():
        try:
            value.encode()
        except UnicodeEncodeError as error:
            return f"{value[error.start]!r}, half of a UTF-16 surrogate pair,"
    return None


def check_length(value: str, *, field: str, limit: int) -> str:
    """Text that fits its limit and can be stored."""
    if problem := unstorable(value):
        raise InvalidInput(
            f"{field} contains {problem} which cannot be stored. Remove it and send the text again."
        )
    if len(value) > limit:
        raise InvalidInput(
            f"{field} is {len(value):,} characters; the limit is {limit:,}. "
            "Shorten it (nothing is truncated for you)."
        )
    return value


def optional_text(value: Any, *, field: str, limit: int = MAX_REFERENCE) -> str | None:
    """An optional string; blank means "none"."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidInput(f"{field} must be text (got {shown(value)}).")
    if not value.strip():
        return None
    return check_length(value.strip(), field=field, limit=limit)


def json_list(text: str) -> list[Any] | None:
    """The list a stripped text holds as a JSON array, or None when it holds none."""
    if not text.startswith("["):
        return None
    try:
        parsed = json.loads(text)
    except (ValueError, RecursionError):  # RecursionError: arrays nested too deep
        return None
    return parsed if isinstance(parsed, list) else None


def parse_list_argument(value: Any) -> list[Any]:
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
    value: Any, *, field: str, max_items: int = MAX_LIST_ITEMS, max_length: int = MAX_ITEM_LENGTH
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
ID_FORMAT = (
    f"the id of one of your memories, as shown in the catalog (its first {SHORT_ID_MIN} or "
    "more characters) or whole"
)


def parse_memory_ref(value: Any) -> uuid.UUID | str | None:
    """A memory id as a tool may send it: the whole id (a UUID), or a prefix of at least
    SHORT_ID_MIN hex characters (hyphens, and the brackets of a catalog line, ignored),
    returned as lowercase hex. None when it is neither."""
    if isinstance(value, uuid.UUID):
        return value
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


def coerce_memory_id(value: Any, *, field: str = "memory_id") -> uuid.UUID:
    """A whole memory id (a UUID)."""
    memory_id = coerce_memory_ref(value, field=field)
    if not isinstance(memory_id, uuid.UUID):
        raise InvalidInput(f"{field} must be a whole memory id, a UUID (got {shown(value)}).")
    return memory_id


def coerce_memory_ref(value: Any, *, field: str = "memory_id") -> uuid.UUID | str:
    """A memory id or a prefix of one (see parse_memory_ref); the caller resolves a prefix."""
    if value is None:
        raise InvalidInput(f"{field} is required: {ID_FORMAT}.")
    memory_ref = parse_memory_ref(value)
    if memory_ref is None:
        raise InvalidInput(f"{field} must be {ID_FORMAT} (got {shown(value)}).")
    return memory_ref


@dataclass(frozen=True)
class IdList:
    """The entries of a list argument of memory ids, sorted by what they are."""

    ids: list[uuid.UUID]  # whole ids, distinct, in the order given
    prefixes: dict[str, Any]  # each distinct prefix (lowercase hex) → the entry as sent
    malformed: list[Any]  # neither


def split_id_list(value: Any, *, field: str, max_items: int) -> IdList:
    """The distinct memory ids and prefixes of a list argument, and its entries that are
    neither.

    For a caller that skips what names no memory instead of refusing the whole list; blank
    and null entries are left out, and only the list itself, or its length, is refused.
    """
    try:
        items = parse_list_argument(value)
    except InvalidInput:
        raise InvalidInput(f"{field} must be a list of memory ids (got {shown(value)}).") from None
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


def coerce_id_list(value: Any, *, field: str, max_items: int) -> IdList:
    """Like split_id_list, but an entry that is not an id (nor a prefix) refuses the list."""
    raw = coerce_string_list(value, field=field, max_items=max_items, max_length=100)
    for item in raw:
        coerce_memory_ref(item, field=f"each entry of {field}")
    return split_id_list(raw, field=field, max_items=max_items)


def coerce_since(value: Any) -> datetime:
    text = value.isoformat() if isinstance(value, datetime) else value
    if isinstance(text, str) and text.strip():
        try:
            return parse_timestamp(text)
        except (ValueError, OverflowError):  # Overflow: a zone pushes it past year 1 or 9999
            pass
    raise InvalidInput(
        f"since must be an ISO-8601 date-time such as 2026-01-31T00:00:00Z (got {shown(value)})."
    )
