"""Recall's statements as they are built: a piece of SQL and the values of its %s marks
together (`_Sql`, `_sql`), so no list of parameters has to follow a statement's text by
hand, and the few words that differ between SQLite and PostgreSQL (`_real`, `_double`).

Used by memories.recall.scoring, which writes the ranking's statements with them; the
names keep the leading underscore they had there, as recall's own and no one else's.
"""

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.db import connection

from memories.models import (
    IndexChange,
    Memory,
    MemoryTag,
    MemoryToken,
    RecallEntry,
    RecallIndex,
)


def _table(
    model: type[IndexChange | Memory | MemoryToken | MemoryTag | RecallEntry | RecallIndex],
) -> str:
    return connection.ops.quote_name(model._meta.db_table)


@dataclass(frozen=True)
class _Sql:
    """A piece of SQL and the values of its %s marks, in order. Built together, a value
    cannot drift from its mark as the statement grows around it."""

    text: str
    params: tuple[Any, ...] = ()


def _sql(template: str, *values: Any) -> _Sql:
    """`template` with its %s marks filled in turn: by a piece's text (its values go
    there among the parameters), or by a parameter."""
    pieces = template.split("%s")
    if len(pieces) != len(values) + 1:
        raise ValueError(f"{len(pieces) - 1} marks in {template!r} for {len(values)} values")
    text = [pieces[0]]
    params: list[Any] = []
    for value, piece in zip(values, pieces[1:], strict=True):
        if isinstance(value, _Sql):
            text.append(value.text)
            params += value.params
        else:
            text.append("%s")
            params.append(value)
        text.append(piece)
    return _Sql("".join(text), tuple(params))


def _join(separator: str, pieces: Iterable[_Sql]) -> _Sql:
    listed = list(pieces)
    return _Sql(
        separator.join(piece.text for piece in listed),
        tuple(value for piece in listed for value in piece.params),
    )


def _in(values: Iterable[object]) -> _Sql:
    """The list inside IN (…), a parameter a value."""
    return _join(", ", (_Sql("%s", (value,)) for value in values))


def _real() -> str:
    return "double precision" if connection.vendor == "postgresql" else "REAL"


def _double(value: float) -> _Sql:
    """A number as a double: a bare 0.6 is exact NUMERIC in PostgreSQL (slower, and not
    the reference's arithmetic)."""
    return _sql(f"CAST(%s AS {_real()})", value)
