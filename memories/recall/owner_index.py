"""What a recall reads of an owner's index as a whole before it ranks, in one statement:
N (the owner's live memories), the index's version and generation, and the document
frequency of each query key (`statistics`). A worker holding words' postings
(memories.recall.postings) reads in that same statement the postings of the words it
does not hold, and what the writes since the version of those it holds changed
(`statistics_and_postings`), so that all of it is one state of the index on both
databases.

A write to the index moves its version and records the entries whose tokens it changed
at that version (IndexChange, memories.recall.indexing): the held postings of a word are
brought up to the index by dropping those entries' postings and adding the ones they
hold now.
"""

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

from django.db import connection

from memories.models import IndexChange, MemoryToken, RecallIndex
from memories.recall.sql import _in, _Sql, _sql, _table


@dataclass(frozen=True)
class OwnerIndex:
    """What recall reads of an owner's index as a whole before ranking."""

    live: int = 0  # N: the owner's live memories
    df: dict[str, int] = field(default_factory=dict)  # live memories holding each key
    version: int = 0  # RecallIndex.version: moves with every write (memories.recall.semantic)
    generation: uuid.UUID | None = None  # RecallIndex.generation


@dataclass(frozen=True)
class Changes:
    """The writes to an owner's index after a version, as recorded: how many versions
    they moved it by (each records at least one row), the entries whose tokens they
    changed (comma-separated, maybe repeated), and by key, the postings those entries
    hold now of the keys asked for (as `statistics_and_postings` lists them)."""

    versions: int = 0
    entries: str = ""
    postings: dict[str, str] = field(default_factory=dict)


def statistics(owner_id: int, keys: Sequence[str]) -> OwnerIndex:
    """N, the index's version and the df of each key, in one statement."""
    index, _, _ = _read_index(owner_id, keys, postings=False)
    return index


def statistics_and_postings(
    owner_id: int, keys: Sequence[str], *, held: Sequence[str] = (), since: int | None = None
) -> tuple[OwnerIndex, dict[str, str], Changes]:
    """`statistics`, and each key's postings as of the same state of the index (one
    statement), as a comma-separated list of entry × 2 plus 1 where the key is among the
    memory's keywords (memories.recall.postings reads it). With `since`, also the changes
    recorded after that version, and the postings of the `held` keys among the entries
    they changed."""
    return _read_index(owner_id, keys, postings=True, held=held, since=since)


# What each row of the statement is.
_INDEX, _KEY, _CHANGES, _CHANGED_KEY = range(4)


def _read_index(
    owner_id: int,
    keys: Sequence[str],
    *,
    postings: bool,
    held: Sequence[str] = (),
    since: int | None = None,
) -> tuple[OwnerIndex, dict[str, str], Changes]:
    token, index, change = _table(MemoryToken), _table(RecallIndex), _table(IndexChange)
    posting = "CAST(t.entry_id * 2 + CAST(t.in_keywords AS INTEGER) AS TEXT)"
    listed = _listed(posting) if postings else "NULL"
    sql = _sql(
        f"SELECT {_INDEX}, NULL, live_memories, version, generation, NULL FROM {index}"
        " WHERE owner_id = %s",
        owner_id,
    )
    if keys:  # PostgreSQL refuses an empty IN ()
        sql = _sql(
            f"%s UNION ALL SELECT {_KEY}, t.key, COUNT(*), 0, NULL, {listed} FROM {token} t"
            " WHERE t.owner_id = %s AND t.key IN (%s) GROUP BY t.key",
            sql,
            owner_id,
            _in(keys),
        )
    if since is not None:
        entries = _listed("CAST(c.entry AS TEXT)")
        sql = _sql(
            f"%s UNION ALL SELECT {_CHANGES}, NULL, COUNT(DISTINCT c.version), 0, NULL,"
            f" {entries} FROM {change} c WHERE c.owner_id = %s AND c.version > %s",
            sql,
            owner_id,
            since,
        )
    if since is not None and held:
        # Looked up by entry (the token's unique key), not by the held words' postings.
        sql = _sql(
            f"%s UNION ALL SELECT {_CHANGED_KEY}, t.key, COUNT(*), 0, NULL, {_listed(posting)}"
            f" FROM {token} t WHERE t.entry_id IN (SELECT c.entry FROM {change} c"
            " WHERE c.owner_id = %s AND c.version > %s) AND t.key IN (%s) GROUP BY t.key",
            sql,
            owner_id,
            since,
            _in(held),
        )
    return _rows(sql)


def _listed(value: str) -> str:
    """The aggregate joining `value` of each row with commas."""
    if connection.vendor == "postgresql":
        return f"string_agg({value}, ',')"
    return f"group_concat({value}, ',')"


def _rows(sql: _Sql) -> tuple[OwnerIndex, dict[str, str], Changes]:
    live, version, generation = 0, 0, None
    df: dict[str, int] = {}
    lists: dict[str, str] = {}
    changes = Changes()
    with connection.cursor() as cursor:
        cursor.execute(sql.text, sql.params)
        for kind, key, count, row_version, row_generation, listed in cursor.fetchall():
            if kind == _INDEX:
                live, version = count, row_version
                generation = (
                    row_generation
                    if isinstance(row_generation, uuid.UUID)
                    else (uuid.UUID(row_generation) if row_generation else None)
                )
            elif kind == _KEY:
                df[key] = count
                if listed:
                    lists[key] = listed
            elif kind == _CHANGES:
                changes = Changes(count, listed or "", changes.postings)
            elif listed:
                changes.postings[key] = listed
    return OwnerIndex(live, df, version, generation), lists, changes
