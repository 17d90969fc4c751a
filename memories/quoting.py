"""Quoting a value someone sent back to them in a message: recognisable, never megabytes,
and in the words of JSON (null, true, false), not Python's."""

import math
import reprlib
from collections.abc import Sized

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
