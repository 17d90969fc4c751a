"""Helpers for the bulk writes of migrate, import and restore: revisions as unsaved rows
(for bulk_create) and re-indexing in batches."""

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.db import connection, models

from memories.indexing import reindex
from memories.models import Memory, Revision

WRITE_BATCH = 500


def revision_for(
    memory: Memory, before: dict[str, Any], *, source: str, action: str, now: datetime
) -> Revision | None:
    """An unsaved revision of this change when a tracked field changed, else None."""
    after = memory.tracked_state()
    changed = [name for name in after if after[name] != before.get(name)]
    if not changed:
        return None
    return Revision(
        memory_id=memory.pk,
        owner_id=memory.owner_id,
        source=source,
        action=action,
        created_at=now,
        changed_fields=changed,
        before=before,
        after=after,
    )


def save_revisions(revisions: Sequence[Revision | None]) -> None:
    Revision.objects.bulk_create([r for r in revisions if r is not None], batch_size=WRITE_BATCH)


def reindex_in_batches(memories: Sequence[Memory], *, text_changed: bool = True) -> None:
    for start in range(0, len(memories), WRITE_BATCH):
        reindex(memories[start : start + WRITE_BATCH], text_changed=text_changed)


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
