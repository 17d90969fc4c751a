"""Strengthening: what a recall records of the memories it returns (SPEC §3), one more
retrieval each, in the fewest statements each database allows."""

import uuid
from datetime import datetime

from django.db import connection, transaction

from memories.models import Memory, RecallEntry, User
from memories.timeutil import micros


def strengthen(owner: User, ids: list[uuid.UUID], *, now: datetime) -> dict[uuid.UUID, int]:
    """Count one more retrieval of each memory still live; their counts as now stored.

    Raw SQL, because the ORM has no UPDATE … RETURNING: the counts come back from the
    statement that raises them, with no read before it. On PostgreSQL one statement
    locks the memories in id order (so two recalls never wait on each other crosswise),
    raises each count from the row as it stands once locked (so concurrent recalls lose
    no increment), skips a memory archived or deleted meanwhile, and raises its recall
    entry's count with it. SQLite cannot change two tables in one statement: there it is
    two, in one transaction, which holds the database's write lock throughout.
    """
    memory_ids = [Memory._meta.pk.get_db_prep_value(i, connection) for i in ids]
    moment = connection.ops.adapt_datetimefield_value(now)
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(
                _STRENGTHEN_POSTGRES,
                [owner.pk, memory_ids, moment, moment, micros(now)],
            )
            rows = cursor.fetchall()
    else:
        marks = ", ".join(["%s"] * len(memory_ids))
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(
                _STRENGTHEN_MEMORIES.format(ids=marks), [moment, moment, owner.pk, *memory_ids]
            )
            rows = cursor.fetchall()
            if rows:
                marks = ", ".join(["%s"] * len(rows))
                cursor.execute(
                    _STRENGTHEN_ENTRIES.format(ids=marks), [micros(now), *(pk for pk, _ in rows)]
                )
    return {_as_uuid(pk): count for pk, count in rows}


def _as_uuid(value: uuid.UUID | str) -> uuid.UUID:
    return value if isinstance(value, uuid.UUID) else uuid.UUID(value)


_MEMORY = Memory._meta.db_table
_ENTRY = RecallEntry._meta.db_table
_STRENGTHEN_POSTGRES = f"""
WITH chosen AS (
    SELECT id FROM {_MEMORY}
    WHERE owner_id = %s AND archived_at IS NULL AND id = ANY(%s)
    ORDER BY id FOR UPDATE
), strengthened AS (
    UPDATE {_MEMORY} AS m
    SET retrieval_count = m.retrieval_count + 1, last_retrieved = %s,
        last_touched_at = GREATEST(m.updated_at, %s)
    FROM chosen WHERE m.id = chosen.id
    RETURNING m.id, m.retrieval_count
), entries AS (
    UPDATE {_ENTRY} AS e
    SET retrieval_count = e.retrieval_count + 1, last_retrieved_us = %s
    FROM strengthened WHERE e.memory_id = strengthened.id
)
SELECT id, retrieval_count FROM strengthened
"""
_STRENGTHEN_MEMORIES = f"""
UPDATE {_MEMORY}
SET retrieval_count = retrieval_count + 1, last_retrieved = %s,
    last_touched_at = MAX(updated_at, %s)
WHERE owner_id = %s AND archived_at IS NULL AND id IN ({{ids}})
RETURNING id, retrieval_count
"""
_STRENGTHEN_ENTRIES = f"""
UPDATE {_ENTRY} SET retrieval_count = retrieval_count + 1, last_retrieved_us = %s
WHERE memory_id IN ({{ids}})
"""
