"""Writing many rows in few statements, below the ORM: the index and the bulk paths
(migrate, import, restore) write thousands of rows, and making a model instance of each,
or compiling a CASE per row, costs more than the write itself."""

from collections.abc import Sequence
from typing import Any

from django.db import connection, models

WRITE_BATCH = 500
# Rows per multi-row INSERT: 2,000 rows of a few columns stay far inside every backend's
# limit on parameters.
INSERT_BATCH = 2000


def insert_rows(
    model: type[models.Model], fields: Sequence[str], rows: Sequence[Sequence[Any]]
) -> None:
    """Insert rows given as field values, with multi-row INSERT statements."""
    if not rows:
        return
    meta = model._meta
    columns = [_column(meta.get_field(name)) for name in fields]
    quote = connection.ops.quote_name
    names = ", ".join(quote(column) for column, _ in columns)
    row_marks = "(" + ", ".join("%s" for _ in columns) + ")"
    # A column often repeats one value (the owner, the entry a memory's tokens belong
    # to): each distinct value is prepared for the database once.
    prepared: list[dict[Any, Any]] = [{} for _ in columns]
    for start in range(0, len(rows), INSERT_BATCH):
        chunk = rows[start : start + INSERT_BATCH]
        params: list[Any] = []
        for row in chunk:
            for (_, field), seen, value in zip(columns, prepared, row, strict=True):
                try:
                    params.append(seen[value])
                except KeyError:
                    params.append(seen.setdefault(value, field.get_db_prep_save(value, connection)))
                except TypeError:  # unhashable (a list for a JSON column)
                    params.append(field.get_db_prep_save(value, connection))
        with connection.cursor() as cursor:
            cursor.execute(
                f"INSERT INTO {quote(meta.db_table)} ({names}) VALUES "
                + ", ".join([row_marks] * len(chunk)),
                params,
            )


def update_rows(rows: Sequence[models.Model], fields: Sequence[str]) -> None:
    """Write these fields of saved rows with one UPDATE statement run for all of them.

    QuerySet.bulk_update builds a CASE expression per field and row, which takes
    Django tens of seconds for ten thousand rows; executemany of one plain statement
    takes well under one on both SQLite and PostgreSQL.
    """
    if not rows:
        return
    meta = rows[0]._meta
    columns = [_column(meta.get_field(name)) for name in fields]
    key_column, key = _column(meta.pk)
    quote = connection.ops.quote_name
    assignments = ", ".join(f"{quote(column)} = %s" for column, _ in columns)
    sql = f"UPDATE {quote(meta.db_table)} SET {assignments} WHERE {quote(key_column)} = %s"
    params = [
        [field.get_db_prep_save(getattr(row, field.attname), connection) for _, field in columns]
        + [key.get_db_prep_value(row.pk, connection)]
        for row in rows
    ]
    with connection.cursor() as cursor:
        for start in range(0, len(params), WRITE_BATCH):
            cursor.executemany(sql, params[start : start + WRITE_BATCH])


def _column(field: object) -> "tuple[str, models.Field[Any, Any]]":
    """The column name and field of a field stored in its own table."""
    if isinstance(field, models.Field) and field.column:
        return field.column, field
    raise TypeError(f"{field!r} is not a column of this table")
