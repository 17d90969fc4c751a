"""Recall ranking in the database (SPEC §3, §3.1): the owner's live memories scored,
ordered and cut in SQL, the same on SQLite and PostgreSQL.

A ranking takes two statements. `statistics` (memories.recall.owner_index) reads N and the
document frequency of each query token from the index, so that Python computes the integer
weights exactly as the reference does (memories.recall.ranking). `best_candidates` then
scores, in one statement, the memories that share a token with the query and could take
a place (or every memory, for a blank query), and returns the winners, plus any row
floating point could have put in the wrong place:

- When the worker holds the query's postings (memories.recall.postings), it finds a
  floor under the cut and hands over only the matches within reach of it
  (memories.recall.impact, `read_held`). Otherwise, for a query of one word, a first
  statement scores a few matches to find a floor; then only the postings that can hold
  a match within reach of it are read (`read_one_word`): for a common word, its keyword
  postings alone, never grouped. A query of several words reads and groups every
  posting.
- The statement counts those matches' hits, but joins to its entry and scores only those
  whose hits leave them a chance: a bound on the cut from the matches with the most
  hits, and the most history and salience any memory can have, leave out the rest
  without changing the answer (`_cut_by_bound`).

- A memory never retrieved scores from integers and the configured weights alone, with
  the reference's operations in the reference's order, so SQL computes exactly the
  reference's float. Among such memories with one score, SQL's tie order (updated_at
  newest first, then id) is the reference's, and only the first `limit` can win.
- A retrieved memory's history takes a logarithm and a power, which the database
  computes with its own maths library and may differ from Python's in the last bit.
  Every such row scoring within EPSILON of the cut is returned.

The caller re-scores what comes back with the reference formula and cuts exactly.

A raw SQL fast path: both statements are written out. The ORM cannot name a
materialised CTE or a second one for the cut; its nearest equivalent (RecallEntry
annotated with a Subquery summing Case(When(key=…)) over MemoryToken, the score as an
expression, a Window(RowNumber()) for the ties) would score every candidate again for
the cut or leave the cut to Python, and the Python equivalent is the reference itself,
memories.recall.ranking.rank over every live memory. So the statements are held to that
reference, computed from scratch: tests/memories/test_relevance_reference.py compares
ranking, scores and ties of recall through this module with tests/memories/reference.py
on random stores, filters and recall histories, test_recall_reference.py does the
same for the seed profile, and test_recall_cut.py for stores where a few words are in
nearly every memory (and that the cut leaves such matches unscored), on whichever
database runs the suite. Each value is put
beside its %s mark as a statement is built (`_sql`, memories.recall.sql), so no list of
parameters has to follow the text's order by hand.
"""

import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db import connection

from memories.models import (
    Memory,
    MemoryTag,
    RecallEntry,
)
from memories.recall import impact
from memories.recall.ranking import SEED_HISTORY, ActivationConfig, Candidate, semantic_shares
from memories.recall.sql import _double, _in, _join, _real, _Sql, _sql, _table
from memories.timeutil import micros
from memories.vocabulary import MEDIUM

# Far above the last-bit differences of ln and pow between maths libraries (about 1e-15
# on scores below 100), far below any difference the formula makes on purpose.
EPSILON = 1e-9
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Filters:
    """What narrows the candidates before ranking (SPEC §4 recall)."""

    category: str | None = None
    ids: Sequence[uuid.UUID] | None = None
    tag_keys: Sequence[str] = ()
    since: datetime | None = None


@dataclass(frozen=True)
class Band:
    """What best_candidates found: the rows to score exactly (each memory's id as an
    integer, and the database's score: of the lexical part alone, when blending) and how
    many memories matched in all. A row becomes a Candidate only when asked for: a
    blended band holds hundreds of rows, of which a few are scored exactly."""

    keys: list[int]  # uuid.UUID.int of each row's memory
    scores: list[float]
    # When the cut left matches unscored, the memories holding a query word, the filters
    # unasked: then more than the rows, and at least `limit`, as the exact count is. When
    # it left postings unread (`impact.read_one_word`), one more than the matches read: more than
    # the rows and at least `limit` all the same, not how many.
    matched: int
    scored: int  # the matches scored: fewer than matched when the cut left some out
    rows: list[tuple[Any, ...]] = field(repr=False)

    @property
    def candidates(self) -> list[Candidate]:
        return self.candidates_at(range(len(self.keys)))

    def candidates_at(self, positions: Iterable[int]) -> list[Candidate]:
        candidates = []
        for i in positions:
            _, salience, count, last, created, updated, hits, *_ = self.rows[i]
            candidates.append(
                Candidate(
                    id=uuid.UUID(int=self.keys[i]),
                    salience=salience,
                    retrieval_count=count,
                    last_retrieved=_moment(last) if last is not None else None,
                    created_at=_moment(created),
                    updated_at=_moment(updated),
                    hits=int(hits),
                )
            )
        return candidates


def best_candidates(
    owner_id: int,
    *,
    weights: Mapping[str, int] | None,
    factors: tuple[int, int],
    denominator: int,
    filters: Filters,
    limit: int,
    now: datetime,
    config: ActivationConfig,
    blend: bool = False,
    cosine_ceiling: int = 1000,
    held: impact.Matches | None = None,
    cosine_bound: impact.CosineBound | None = None,
) -> Band:
    """The `limit` best memories by activation, and every row that could take a place
    among them once scored exactly. `weights` is None for a blank query.

    With `blend` (recall blending in meaning, SPEC §3.2) the database scores the lexical
    part alone (0.7 × lexical relevance) and returns every row the cosine part, at most
    0.3 of relevance, could lift into the best `limit`: every row within the cosine part
    of `cosine_ceiling` (thousandths; no memory's cosine with the query is higher) of the
    cut.

    `held` gives every match of the query and its hits (found by the
    worker from postings it holds): then only those that can place are handed to the
    statement, rather than every posting grouped in it. `cosine_bound` gives the most
    cosine among some memories or all: the matches that could place bound the reach, or
    all the owner's memories when those are not known.
    """
    blend = blend and weights is not None
    lexical_share, semantic_share = semantic_shares(config) if blend else (1, 0)
    entry = _table(RecallEntry)
    ctes = []
    if weights is not None:
        source = f"kept h JOIN {entry} e ON e.id = h.id"
        hits = "h.hits"
    else:
        source = f"{entry} e"
        hits = "0"

    # The reference's terms in the reference's order: (history + (sw × salience)) +
    # (rw × relevance), every number a double (see _double).
    salience_cases = _join(
        " ",
        (
            _sql("WHEN %s THEN %s", name, _double(value))
            for name, value in config.salience_scores.items()
        ),
    )
    salience = _sql(
        "(%s * (CASE e.salience %s ELSE %s END))",
        _double(config.salience_weight),
        salience_cases,
        _double(config.salience_scores[MEDIUM]),
    )
    score = _sql("(%s) + %s", _history_sql(now, config), salience)
    if weights is not None:
        score = _sql(
            "(%s) + %s",
            score,
            _relevance_sql(config.relevance_weight * float(lexical_share), denominator),
        )

    conditions = [_sql("e.owner_id = %s", owner_id)]
    if filters.category is not None:
        conditions.append(_sql("e.category = %s", filters.category))
    if filters.ids is not None:
        pk = Memory._meta.pk
        assert pk is not None
        ids = [pk.get_db_prep_value(i, connection) for i in filters.ids]
        conditions.append(_sql("e.memory_id IN (%s)", _in(ids)))
    for key in filters.tag_keys:
        conditions.append(
            _sql(
                f"EXISTS (SELECT 1 FROM {_table(MemoryTag)} g"
                " WHERE g.memory_id = e.memory_id AND g.owner_id = %s AND g.key = %s)",
                owner_id,
                key,
            )
        )
    if filters.since is not None:
        conditions.append(_sql("e.updated_us >= %s", micros(filters.since)))

    # Every row scoring within `reach` of the cut goes back to the caller.
    reach = EPSILON
    meaning = config.relevance_weight * float(semantic_share) if blend else 0.0
    reach += meaning * cosine_ceiling / 1000
    scoring = list(conditions)
    # How many memories match, when the cut left some unscored (see Band.matched).
    matched = "(SELECT COUNT(*) FROM hits)"
    if weights is not None:
        relevance_weight = config.relevance_weight * float(lexical_share)
        cut = impact.Cut(
            denominator=denominator,
            score=score,
            conditions=_join(" AND ", conditions),
            limit=limit,
            reach=reach,
            relevance_weight=relevance_weight,
            config=config,
            meaning=meaning,
            ceiling=cosine_ceiling,
        )
        read = (
            impact.read_held(entry, held, cut, cosine_bound)
            if held is not None
            else impact.read_one_word(owner_id, entry, weights=weights, factors=factors, cut=cut)
        )
        if read is not None and read.reach is not None:
            reach = read.reach
        elif cosine_bound is not None and meaning > 0:  # by every memory of the owner's
            reach = cut.reach_with(min(cosine_ceiling, cosine_bound.ceiling(None)))
        if read is None:
            ctes.append(impact.all_hits(owner_id, weights, factors))
            floor = None
        else:
            ctes.append(read.hits)
            floor = read.floor
            if not read.whole:
                matched = "(SELECT COUNT(*) + 1 FROM hits)"
        bounds, within_reach = _cut_by_bound(
            entry,
            score=score,
            salience=salience,
            relevance=_relevance_sql(relevance_weight, denominator),
            conditions=_join(" AND ", conditions),
            limit=limit,
            reach=reach,
            config=config,
            floor=floor,
        )
        ctes += bounds
        scoring += within_reach
    ctes.append(
        _sql(
            "scored AS MATERIALIZED (SELECT e.memory_id AS id, e.salience AS salience,"
            " e.retrieval_count AS rc, e.last_retrieved_us AS lr, e.created_us AS cr,"
            f" e.updated_us AS up, {hits} AS hits, %s AS score"
            f" FROM {source} WHERE %s)",
            score,
            _join(" AND ", scoring),
        )
    )
    ctes.append(
        _sql(
            "cut AS (SELECT MIN(score) AS score FROM"
            " (SELECT score FROM scored ORDER BY score DESC LIMIT %s) AS best)",
            limit,
        )
    )
    columns = "band.id, band.salience, band.rc, band.lr, band.cr, band.up, band.hits, band.score"
    scored = "(SELECT COUNT(*) FROM scored)"
    if weights is None:
        matched = scored
    else:
        # Rows the bound left unscored are matches too, unless the filters refuse them.
        matched = (
            "(CASE WHEN (SELECT score FROM floor) IS NULL"
            f" THEN (SELECT COUNT(*) FROM scored) ELSE {matched} END)"
        )
    if blend:
        # Every row the cosine part could lift past the cut, best first.
        sql = _sql(
            f"WITH %s SELECT {columns}, {matched}, {scored} FROM"
            " (SELECT s.* FROM scored s, cut WHERE s.score >= cut.score - %s) AS band",
            _join(", ", ctes),
            reach,
        )
    else:
        sql = _sql(
            f"WITH %s SELECT {columns}, {matched}, {scored} FROM ("
            "SELECT s.*, ROW_NUMBER() OVER ("
            "PARTITION BY s.score, s.rc > 0 ORDER BY s.up DESC, s.id) AS nth"
            " FROM scored s, cut WHERE s.score >= cut.score - %s) AS band"
            " WHERE band.rc > 0 OR band.nth <= %s",
            _join(", ", ctes),
            EPSILON,
            limit,
        )
    with connection.cursor() as cursor:
        cursor.execute(sql.text, sql.params)
        rows = cursor.fetchall()
    return Band(
        keys=[_key(row[0]) for row in rows],
        scores=[float(row[7]) for row in rows],
        matched=int(rows[0][8]) if rows else 0,
        scored=int(rows[0][9]) if rows else 0,
        rows=rows,
    )


def _cut_by_bound(
    entry: str,
    *,
    score: "_Sql",
    salience: "_Sql",
    relevance: "_Sql",
    conditions: "_Sql",
    limit: int,
    reach: float,
    config: ActivationConfig,
    floor: float | None = None,
) -> tuple[list["_Sql"], list["_Sql"]]:
    """The CTEs `floor` and `kept`: the matches that can still score within `reach` of
    the cut, so that only those are joined to their entries; and the condition that
    scores, of those, only the ones whose salience leaves them a chance.

    `floor` is the `limit`-th best score among the PROBE matches with the most hits
    that the filters admit: a score the cut can only be above, since the cut is the
    `limit`-th best of a superset. NULL when fewer than `limit` of them are admitted
    (nothing is left out then). A match's score is its history plus its salience part,
    plus its relevance; the first two are at most `ceiling` (the largest history any
    memory can have plus the largest salience part), so a match whose ceiling plus
    relevance, in the very float operations of its score, falls below floor − reach
    scores below cut − reach: it could be neither among the best nor in the band. Once
    joined, its own salience part takes the place of the largest, and its history
    (the logarithm and the power) is computed only if that leaves it a chance. Floats
    round monotonically, so the bounds hold bit for bit; EPSILON more is margin.

    The seed's history is unbounded: there every match is kept. A `floor` known already
    (`impact.read_one_word` found it) is the floor.
    """
    if config.history == SEED_HISTORY:
        return [_Sql("floor AS (SELECT NULL AS score)"), _Sql("kept AS (SELECT * FROM hits)")], []
    most_history, most_salience = impact.most_history_and_salience(config)
    ceiling = most_history + most_salience
    probe = max(impact.PROBE, 4 * limit)
    within_reach = _sql(
        "((SELECT score FROM floor) IS NULL OR (%s + %s) + %s >= (SELECT score FROM floor) - %s)",
        _double(most_history),
        salience,
        relevance,
        reach + EPSILON,
    )
    if floor is not None:
        lowest = _sql("floor AS (SELECT %s AS score)", _double(floor))
    else:
        lowest = _sql(
            "floor AS (SELECT CASE WHEN COUNT(*) < %s THEN NULL ELSE MIN(score) END AS score"
            " FROM (SELECT %s AS score FROM"
            f" (SELECT * FROM hits ORDER BY hits DESC LIMIT {probe:d}) AS h"
            f" JOIN {entry} e ON e.id = h.id WHERE %s ORDER BY score DESC LIMIT %s) AS probe)",
            limit,
            score,
            conditions,
            limit,
        )
    return [
        lowest,
        _sql(
            "kept AS (SELECT h.* FROM hits h WHERE (SELECT score FROM floor) IS NULL"
            " OR %s + %s >= (SELECT score FROM floor) - %s)",
            _double(ceiling),
            relevance,
            reach + EPSILON,
        ),
    ], [within_reach]


def _relevance_sql(weight: float, denominator: int) -> "_Sql":
    """relevance_weight × (the lexical share of) relevance of a match, from its hits."""
    return _sql(
        f"(%s * (CAST(h.hits AS {_real()}) / %s))",
        _double(weight),
        _double(float(denominator)),
    )


def _history_sql(now: datetime, config: ActivationConfig) -> "_Sql":
    """memories.recall.ranking.history in SQL: for a retrieved memory its recency-weighted count
    a, bounded (history_weight × (1 − 1 / (1 + a))) or the seed's (base_weight × a); for
    one never retrieved 0, or the seed's base_weight × novelty_floor.
    """
    real = _real()
    days = _sql(
        f"(CAST(%s - COALESCE(e.last_retrieved_us, e.created_us) AS {real}) / %s) / %s",
        micros(now),
        _double(1_000_000.0),
        _double(86_400.0),
    )
    weighted = _sql(
        f"(LN(CAST(e.retrieval_count + 1 AS {real}))"
        " * POWER((CASE WHEN %s > 0 THEN %s ELSE 0 END) + 1, %s))",
        days,
        days,
        _double(config.decay_exponent),
    )
    if config.history == SEED_HISTORY:
        return _sql(
            "%s * (CASE WHEN e.retrieval_count = 0 THEN %s ELSE %s END)",
            _double(config.base_weight),
            _double(config.novelty_floor),
            weighted,
        )
    # a / (1 + a) as 1 − 1 / (1 + a): the logarithm and the power once per row.
    one = _double(1.0)
    return _sql(
        "CASE WHEN e.retrieval_count = 0 THEN %s ELSE %s * (%s - %s / (%s + %s)) END",
        _double(0.0),
        _double(config.history_weight),
        one,
        one,
        one,
        weighted,
    )


def _key(value: uuid.UUID | str) -> int:
    """A memory id as the database returns it (a UUID, or SQLite's 32 hex digits) as an
    integer, without building a UUID."""
    return value.int if isinstance(value, uuid.UUID) else int(value, 16)


def _moment(microseconds: int) -> datetime:
    return _EPOCH + timedelta(microseconds=microseconds)
