"""What a recall reads of an owner's index as a whole before it ranks, in one statement:
N (the owner's live memories), the index's version and generation, and the document
frequency of each query key (`statistics`). A worker holding words' postings
(memories.recall.postings) reads in that same statement the postings of the words it
does not hold, and what the writes since the version of those it holds changed
(`statistics_and_postings`), so that all of it is one state of the index on both
databases; and, once per owner, every entry's salience and memory id.

A write to the index moves its version and records the entries it changed at that
version (IndexChange, memories.recall.indexing): the held postings of a word are brought
up to the index by dropping those entries' postings and adding the ones they hold now,
and the held salience by taking those entries' salience now.
"""

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

from django.db import connection

from memories.models import IndexChange, MemoryToken, RecallEntry, RecallIndex
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
    they moved it by (each records at least one row), the entries they changed
    (comma-separated, maybe repeated), by key the postings those entries hold now of the
    keys asked for (as `statistics_and_postings` lists them), and by salience those of
    the entries still live that have it, with their memories."""

    versions: int = 0
    entries: str = ""
    postings: dict[str, str] = field(default_factory=dict)
    salience: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class IndexRead:
    """What `statistics_and_postings` read: the index, each key's postings, the changes
    since the version given, and, when asked for, each salience's entries and their
    memories (as `_entries_and_memories` lists them)."""

    index: OwnerIndex
    postings: dict[str, str]
    changes: Changes
    salience: dict[str, str]


def statistics(owner_id: int, keys: Sequence[str]) -> OwnerIndex:
    """N, the index's version and the df of each key, in one statement."""
    return _read_index(owner_id, keys, postings=False).index


def statistics_and_postings(
    owner_id: int,
    keys: Sequence[str],
    *,
    held: Sequence[str] = (),
    since: int | None = None,
    salience: bool = False,
) -> IndexRead:
    """`statistics`, and each key's postings as of the same state of the index (one
    statement), as a comma-separated list of entry × 2 plus 1 where the key is among the
    memory's keywords (memories.recall.postings reads it). With `since`, also the changes
    recorded after that version, the postings of the `held` keys among the entries they
    changed and those entries' salience and memory; with `salience`, every live entry's."""
    return _read_index(owner_id, keys, postings=True, held=held, since=since, salience=salience)


def keys_of_newest(owner_id: int, *, newest: int, least: int) -> dict[str, int]:
    """The keys held by at least `least` of the owner's `newest` entries (the latest
    written), each with how many of them hold it: a sample of which words are common in
    the store, read from the token index's unique key (entry, key) rather than by
    counting every posting of the owner's."""
    token, entry = _table(MemoryToken), _table(RecallEntry)
    sql = _sql(
        f"SELECT t.key, COUNT(*) FROM {token} t WHERE t.entry_id IN (SELECT e.id"
        f" FROM {entry} e WHERE e.owner_id = %s ORDER BY e.id DESC LIMIT %s)"
        " GROUP BY t.key HAVING COUNT(*) >= %s",
        owner_id,
        newest,
        least,
    )
    with connection.cursor() as cursor:
        cursor.execute(sql.text, sql.params)
        return dict(cursor.fetchall())


# What each row of the statement is.
_INDEX, _KEY, _CHANGES, _CHANGED_KEY, _SALIENCE, _CHANGED_SALIENCE = range(6)


def _read_index(
    owner_id: int,
    keys: Sequence[str],
    *,
    postings: bool,
    held: Sequence[str] = (),
    since: int | None = None,
    salience: bool = False,
) -> IndexRead:
    token, index, change = _table(MemoryToken), _table(RecallIndex), _table(IndexChange)
    entry = _table(RecallEntry)
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
    ids = _entries_and_memories()
    if salience:
        sql = _sql(
            f"%s UNION ALL SELECT {_SALIENCE}, e.salience, COUNT(*), 0, NULL, {ids}"
            f" FROM {entry} e WHERE e.owner_id = %s GROUP BY e.salience",
            sql,
            owner_id,
        )
    if since is not None:
        sql = _sql(
            f"%s UNION ALL SELECT {_CHANGED_SALIENCE}, e.salience, COUNT(*), 0, NULL, {ids}"
            f" FROM {entry} e WHERE e.id IN (SELECT c.entry FROM {change} c"
            " WHERE c.owner_id = %s AND c.version > %s) GROUP BY e.salience",
            sql,
            owner_id,
            since,
        )
    return _rows(sql)


def _listed(value: str) -> str:
    """The aggregate joining `value` of each row with commas."""
    if connection.vendor == "postgresql":
        return f"string_agg({value}, ',')"
    return f"group_concat({value}, ',')"


def _entries_and_memories() -> str:
    """The aggregate joining, for each entry `e`, 48 hexadecimal digits: 16 of its id,
    then 32 of its memory's (memories.recall.postings reads them). One aggregate, so that
    the two come in the same order however the database aggregates."""
    if connection.vendor == "postgresql":
        return (
            "string_agg(encode(int8send(e.id), 'hex') || encode(uuid_send(e.memory_id), 'hex'), '')"
        )
    # A uuid is stored as its 32 digits; %% is a % once the parameters are put in.
    return "group_concat(printf('%%016x', e.id) || e.memory_id, '')"


def _rows(sql: _Sql) -> IndexRead:
    live, version, generation = 0, 0, None
    df: dict[str, int] = {}
    lists: dict[str, str] = {}
    changes = Changes()
    salience: dict[str, str] = {}
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
                changes = Changes(count, listed or "", changes.postings, changes.salience)
            elif kind == _SALIENCE:
                salience[key] = listed
            elif kind == _CHANGED_SALIENCE:
                changes.salience[key] = listed
            elif listed:
                changes.postings[key] = listed
    return IndexRead(OwnerIndex(live, df, version, generation), lists, changes, salience)
