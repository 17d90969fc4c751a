"""The sizes a memory's fields may have (SPEC §2, §4), and the checks every interface's
values pass before they are stored."""

from memories.errors import BlankText, LimitExceeded, TooManyItems, Unstorable

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
    """Text that fits its limit and can be stored (LimitExceeded, Unstorable)."""
    if problem := unstorable(value):
        raise Unstorable(field, problem)
    if len(value) > limit:
        raise LimitExceeded(field, limit, len(value))
    return value


def check_text(value: str, *, field: str, limit: int) -> str:
    """Non-blank text that fits its limit and can be stored."""
    if not value.strip():
        raise BlankText(field)
    return check_length(value, field=field, limit=limit)


def check_optional(value: str | None, *, field: str, limit: int = MAX_REFERENCE) -> str | None:
    """An optional text: None (or blank) for none, else checked like any text."""
    if value is None or not value.strip():
        return None
    return check_length(value, field=field, limit=limit)


def check_items(
    values: list[str], *, field: str, max_items: int = MAX_LIST_ITEMS, max_length: int
) -> list[str]:
    """A list of texts a memory may hold: few enough, each short enough and storable."""
    if len(values) > max_items:
        raise TooManyItems(field, max_items, len(values))
    for value in values:
        check_length(value, field=f"each entry of {field}", limit=max_length)
    return values
