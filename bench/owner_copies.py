"""Copies of one owner's store for other owners, made in SQL (the many-users bench).

Loading a thousand owners through the bulk loader costs its per-row work a thousand times
over (about 7 owners a minute on PostgreSQL). A copy instead reads the loaded owner's rows
in the database and writes them again for each new owner, one INSERT … SELECT per table
for a batch of owners: the memory rows under ids the caller chooses (with their links
moved to those ids), their ranking entries, tokens, tags and vectors, and the owner's
recall index. The kept counts (memories.models.counts) follow by the memory table's own
triggers on SQLite; on PostgreSQL the copy runs without row triggers (the foreign keys'
checks queued for the commit cost more than the copy) and the copies' counts are made
again from their rows.
"""

import json
import uuid
from collections.abc import Mapping
from typing import Any

from django.db import connection, models, transaction

from memories.models import (
    Memory,
    MemoryTag,
    MemoryToken,
    MemoryVector,
    RecallEntry,
    RecallIndex,
)
from memories.models.counts import recount

# The table a batch's id map is written to: one row per memory of each new owner.
MAP_TABLE = "bench_owner_copy_map"


def copy_owner(source_id: int, targets: Mapping[int, Mapping[uuid.UUID, uuid.UUID]]) -> None:
    """Give each target owner (by id) a copy of the source owner's store, in one
    transaction: `targets[owner][source memory id]` is the copy's id, and the copy's
    links go through the same map. Every source memory needs an id in every map, and
    the target owners must hold no memory yet."""
    source_ids = set(
        Memory.objects.filter(owner_id=source_id).values_list("pk", flat=True).order_by()
    )
    rows = []
    source_links = dict(
        Memory.objects.filter(owner_id=source_id).values_list("pk", "linked_memories").order_by()
    )
    for owner_id, ids in targets.items():
        if set(ids) != source_ids:
            raise ValueError(f"the map of owner {owner_id} does not name every source memory")
        if len(set(ids.values())) != len(ids):
            raise ValueError(f"the map of owner {owner_id} gives two memories one id")
        for old, new in ids.items():
            moved = [str(ids.get(uuid.UUID(i), i)) for i in source_links[old]]
            rows.append((_uuid(old), _uuid(new), owner_id, json.dumps(moved)))
    with transaction.atomic(), connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            # Without the row triggers: the foreign keys' checks, millions of them queued
            # for the commit, took longer than the copy itself. The counts are made
            # again from the rows below, for these owners only.
            cursor.execute("SET LOCAL session_replication_role = replica")
        _make_map(cursor, rows)
        _copy_memories(cursor, source_id)
        _copy_keyed(cursor, RecallEntry, source_id, "memory_id", skip={"id"})
        _copy_keyed(cursor, MemoryVector, source_id, "memory_id", skip=set())
        _copy_keyed(cursor, MemoryTag, source_id, "memory_id", skip={"id"})
        _copy_tokens(cursor, source_id)
        cursor.execute(f"DROP TABLE {MAP_TABLE}")
        if connection.vendor == "postgresql":
            cursor.execute("SET LOCAL session_replication_role = DEFAULT")
            recount(list(targets))
        index = RecallIndex.objects.get(owner_id=source_id)
        RecallIndex.objects.bulk_create(
            RecallIndex(
                owner_id=owner_id,
                profile=index.profile,
                live_memories=index.live_memories,
                version=index.version,
                normalised=index.normalised,
            )
            for owner_id in targets
        )


def _uuid(value: uuid.UUID) -> Any:
    return Memory._meta.pk.get_db_prep_save(value, connection)


def _q(name: str) -> str:
    return connection.ops.quote_name(name)


def _make_map(cursor: Any, rows: list[tuple[Any, ...]]) -> None:
    uuid_type = "uuid" if connection.vendor == "postgresql" else "char(32)"
    cursor.execute(
        f"CREATE TEMPORARY TABLE {MAP_TABLE} (old_id {uuid_type} NOT NULL,"
        f" new_id {uuid_type} NOT NULL PRIMARY KEY, owner_id integer NOT NULL, links text,"
        " old_entry bigint, new_entry bigint)"
    )
    cursor.executemany(
        f"INSERT INTO {MAP_TABLE} (old_id, new_id, owner_id, links) VALUES (%s, %s, %s, %s)",
        rows,
    )
    cursor.execute(f"CREATE INDEX {MAP_TABLE}_old ON {MAP_TABLE} (old_id)")
    cursor.execute(f"ANALYZE {MAP_TABLE}")


def _columns(model: type[models.Model], skip: set[str]) -> list[str]:
    return [
        f.column
        for f in model._meta.concrete_fields
        if f.column is not None and f.column not in skip and not getattr(f, "generated", False)
    ]


def _copy_memories(cursor: Any, source_id: int) -> None:
    links = "CAST(m.links AS jsonb)" if connection.vendor == "postgresql" else "m.links"
    replaced = {"id": "m.new_id", "owner_id": "m.owner_id", "linked_memories": links}
    columns = _columns(Memory, skip=set())
    values = ", ".join(replaced.get(c, f"s.{_q(c)}") for c in columns)
    cursor.execute(
        f"INSERT INTO {_q(Memory._meta.db_table)} ({', '.join(map(_q, columns))})"
        f" SELECT {values} FROM {_q(Memory._meta.db_table)} s"
        f" JOIN {MAP_TABLE} m ON m.old_id = s.id WHERE s.owner_id = %s",
        [source_id],
    )


def _copy_keyed(
    cursor: Any, model: type[models.Model], source_id: int, key: str, skip: set[str]
) -> None:
    """Rows that name their memory by `key`: the copy's memory and owner in their place."""
    replaced = {key: "m.new_id", "owner_id": "m.owner_id"}
    columns = _columns(model, skip)
    values = ", ".join(replaced.get(c, f"s.{_q(c)}") for c in columns)
    cursor.execute(
        f"INSERT INTO {_q(model._meta.db_table)} ({', '.join(map(_q, columns))})"
        f" SELECT {values} FROM {_q(model._meta.db_table)} s"
        f" JOIN {MAP_TABLE} m ON m.old_id = s.{_q(key)} WHERE s.owner_id = %s",
        [source_id],
    )


def _copy_tokens(cursor: Any, source_id: int) -> None:
    """Tokens point at ranking entries by the entries' own ids: the copy's entry is the one
    of the copy's memory, found once per memory (not once per token) in the map."""
    entries = _q(RecallEntry._meta.db_table)
    cursor.execute(
        f"UPDATE {MAP_TABLE} SET"
        f" old_entry = (SELECT id FROM {entries} WHERE memory_id = {MAP_TABLE}.old_id),"
        f" new_entry = (SELECT id FROM {entries} WHERE memory_id = {MAP_TABLE}.new_id)"
    )
    cursor.execute(f"CREATE INDEX {MAP_TABLE}_entry ON {MAP_TABLE} (old_entry)")
    cursor.execute(f"ANALYZE {MAP_TABLE}")
    replaced = {"entry_id": "m.new_entry", "owner_id": "m.owner_id"}
    columns = _columns(MemoryToken, skip={"id"})
    values = ", ".join(replaced.get(c, f"t.{_q(c)}") for c in columns)
    cursor.execute(
        f"INSERT INTO {_q(MemoryToken._meta.db_table)} ({', '.join(map(_q, columns))})"
        f" SELECT {values} FROM {_q(MemoryToken._meta.db_table)} t"
        f" JOIN {MAP_TABLE} m ON m.old_entry = t.entry_id"
        " WHERE t.owner_id = %s",
        [source_id],
    )
