"""Which postings of a query's words a worded recall must read (issue 32, item 1): the
recall index in impact order, so that a query of common words reads about its answer,
not its posting lists.

The token index is ordered (owner, key, in_keywords, entry): each word's postings come
as two classes, the keyword postings (each worth keyword_factor × the word's weight in
hits) and the content-only ones (content_factor × the weight). A memory's score is its
history plus its salience part plus relevance_weight × hits / denominator, and the
first two are at most `ceiling` (the most history and salience any memory can have).

Given a floor the cut can only be above (the `limit`-th best score of some matches the
filters admit), a memory scoring within `reach` of the cut has hits of at least what
the floor leaves relevance to bring. Take the classes away one by one, keyword ones
first (`classes`): after each, the most hits a memory holding none of the classes taken
so far can have falls. Once that most, with the ceiling, is below the floor less the
reach, every memory that can take a place holds a posting of a class taken: those
classes are all that must be read (max-score, as in Turtle and Flood's evaluation of
top-k queries), and their memories are scored with all their hits. For a common word
that is its keyword postings, about a seventh of them in the bench's stores.

Any order of taking is sound (the most falls whichever class goes); keyword ones first
because they are few. Hits are integers and the bound is checked with MARGIN to spare,
so float rounding cannot let a match that could place go unread.

The statements that read them are here too (`read_one_word`, `read_held`, `holding_any`,
and `all_hits` when every posting must be read); memories.recall.scoring builds the rest
of the ranking on them.
"""

import json
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from django.db import connection

from memories.models import MemoryToken
from memories.recall.ranking import SEED_HISTORY, ActivationConfig
from memories.recall.sql import _in, _join, _Sql, _sql, _table
from memories.vocabulary import MEDIUM

# How many of the matches with the most hits are scored first, to bound the cut from
# below (scoring.best_candidates): enough that the filters usually leave `limit` of them.
PROBE = 64
# Margin on each bound, far above the rounding of the few float operations that make a
# score (about 1e-15 on scores below 100) and the same as the band's (scoring.EPSILON).
MARGIN = 1e-9
# The most ranges of postings `all_hits` sums as one union on SQLite (a query of 32 words):
# far below the 500 terms SQLite allows a compound SELECT.
MOST_RANGES = 64


@dataclass(frozen=True)
class Posting:
    """A class of postings: a word's, held as a keyword or in the content only."""

    key: str
    in_keywords: bool
    hits: int  # what one such posting adds to a memory's hits


def classes(weights: Mapping[str, int], factors: tuple[int, int]) -> list[Posting]:
    """Every class of postings of the query in the order they are taken: each word's most
    valuable class (its keyword postings, a small share of them) before any word's
    other, and among those the most valuable first (ties by key, then keyword before
    content, so the order is the same on every run)."""
    keyword, content = factors
    every = [
        Posting(key, in_keywords, weight * (keyword if in_keywords else content))
        for key, weight in weights.items()
        for in_keywords in (True, False)
    ]
    ordered = sorted(every, key=lambda p: (-p.hits, p.key, not p.in_keywords))
    firsts: dict[str, Posting] = {}
    for posting in ordered:
        firsts.setdefault(posting.key, posting)
    chosen = set(firsts.values())
    return [p for p in ordered if p in chosen] + [p for p in ordered if p not in chosen]


def to_read(
    weights: Mapping[str, int],
    factors: tuple[int, int],
    *,
    relevance_weight: float,
    denominator: int,
    ceiling: float,
    floor: float,
    reach: float,
) -> list[Posting]:
    """The classes of postings that hold every memory which can score at least
    `floor` − `reach`: a memory holding none of them scores below that, whatever its
    history and salience (at most `ceiling` together). `relevance_weight` is what
    multiplies hits / `denominator` in the score."""
    ordered = classes(weights, factors)
    # The most hits a memory can have from each word, among the classes not yet taken.
    best = {key: 0 for key in weights}
    for posting in ordered:
        best[posting.key] = max(best[posting.key], posting.hits)
    threshold = floor - reach - MARGIN
    taken: list[Posting] = []
    for posting in ordered:
        most = sum(best.values())
        if relevance_weight * (most / denominator) + ceiling + MARGIN < threshold:
            break
        taken.append(posting)
        # Without this class, the word gives at most what its other class does (if not
        # taken yet: classes come most valuable first, so that one is worth less).
        rest = [p.hits for p in ordered if p.key == posting.key and p not in taken]
        best[posting.key] = max(rest, default=0)
    return taken


def most_history_and_salience(config: ActivationConfig) -> tuple[float, float]:
    """The most history and the most salience part any memory can have in a score."""
    most_history = max(config.history_weight, 0.0)
    most_salience = max(
        config.salience_weight * value
        for value in [*config.salience_scores.values(), config.salience_scores[MEDIUM]]
    )
    return most_history, most_salience


# --- the statements -----------------------------------------------------------------------


def holding_any(owner_id: int, keys: Sequence[str], ids: Sequence[uuid.UUID]) -> set[uuid.UUID]:
    """Those of these memories (live, the owner's) that hold one of these index keys."""
    return set(
        MemoryToken.objects.filter(owner_id=owner_id, key__in=keys, entry__memory_id__in=ids)
        .values_list("entry__memory_id", flat=True)
        .distinct()
    )


def all_hits(owner_id: int, weights: Mapping[str, int], factors: tuple[int, int]) -> _Sql:
    """The CTE `hits`: every match of the query and its hits, from every posting.

    On SQLite each class of postings is read as its own range of the index, every
    posting of it worth the class's hits, and the ranges summed by memory: the same
    integers as a sum of CASE over each posting's key and flag, without the CASE, which
    was about a quarter of the grouping's cost (3 common words at 100,000 memories:
    45,611 matches grouped in 23.5 ms instead of 31–35). PostgreSQL cannot estimate how
    many memories such a union groups (it guesses 200) and plans it in parallel, twice
    as slow as its hash of the one range: it keeps the CASE, and so does a query of more
    words than a union may have ranges (SQLite refuses more than 500)."""
    token = _table(MemoryToken)
    ordered = classes(weights, factors)
    if connection.vendor == "postgresql" or len(ordered) > MOST_RANGES:
        return _sql(
            "hits AS MATERIALIZED (SELECT t.entry_id AS id, %s AS hits"
            f" FROM {token} t WHERE t.owner_id = %s AND t.key IN (%s)"
            " GROUP BY t.entry_id)",
            hits_sum(weights, factors),
            owner_id,
            _in(weights),
        )
    ranges = _join(
        " UNION ALL ",
        (
            _sql(
                f"SELECT entry_id AS id, %s AS hits FROM {token}"
                " WHERE owner_id = %s AND key = %s AND in_keywords = %s",
                posting.hits,
                owner_id,
                posting.key,
                posting.in_keywords,
            )
            for posting in ordered
        ),
    )
    return _sql(
        "hits AS MATERIALIZED (SELECT p.id AS id, SUM(p.hits) AS hits FROM (%s) AS p"
        " GROUP BY p.id)",
        ranges,
    )


def hits_sum(weights: Mapping[str, int], factors: tuple[int, int]) -> _Sql:
    """A memory's hits, summed over its postings `t` of the query's words."""
    keyword, content = factors
    by_key = _join(" ", (_sql("WHEN %s THEN %s", key, weight) for key, weight in weights.items()))
    return _sql(
        "SUM(CASE t.key %s END * CASE WHEN t.in_keywords THEN %s ELSE %s END)",
        by_key,
        keyword,
        content,
    )


@dataclass(frozen=True)
class NarrowRead:
    """What `read_one_word` or `read_held` found: a floor, and the CTE `hits` of the matches
    that can score within reach of it (`whole`: every match); `reach` when the meaning
    part was bounded by a cosine ceiling found here (None: the cut's reach)."""

    floor: float
    hits: _Sql
    whole: bool
    reach: float | None = None


@dataclass(frozen=True)
class Cut:
    """What a narrow read needs of the ranking statement (scoring.best_candidates): a
    match's score in SQL over the entry `e` and its hits `h`, the filters' conditions, the
    places, the reach of the band below the cut, what multiplies hits / `denominator` in
    the score, and the constants. With recall blending in meaning, the reach holds what
    the meaning part can add, `meaning` × the cosine `ceiling` (thousandths) / 1000."""

    denominator: int
    score: _Sql
    conditions: _Sql
    limit: int
    reach: float
    relevance_weight: float
    config: ActivationConfig
    meaning: float = 0.0
    ceiling: int = 1000

    def reach_with(self, ceiling: int) -> float:
        """The reach were no match's cosine above `ceiling` (thousandths)."""
        return self.reach - self.meaning * (self.ceiling - ceiling) / 1000


def read_one_word(
    owner_id: int,
    entry: str,
    *,
    weights: Mapping[str, int],
    factors: tuple[int, int],
    cut: Cut,
) -> NarrowRead | None:
    """For a query of one word the worker does not hold (memories.recall.postings: it
    holds fewer than HOLD_FROM postings, or no budget is left for postings): a floor the
    cut can only be above, and the CTE `hits` of the matches read from only the classes of
    postings that hold every match within `reach` of it (memories.recall.impact), each
    match's hits its one posting's, never grouped. None when every posting is read and
    grouped as before (`all_hits`): a query of several words, the seed's unbounded
    history, or a probe that found fewer than `limit` matches the filters admit.

    The probe: the first PROBE postings (in index order) of the word's keyword class,
    and the `limit`-th best score of those the filters admit: the cut is the `limit`-th
    best of a superset.

    A query of several words reads every posting (unless the worker holds them:
    `read_held`): a memory's hits then need all its postings, and searching the index
    for those of the few memories a keyword class holds costs about three times reading
    a posting in turn (on SQLite at 100,000 memories), more than it saves unless keyword
    postings are under a sixth of the query's postings divided by its words.
    """
    config, limit = cut.config, cut.limit
    if config.history == SEED_HISTORY or cut.denominator <= 0 or len(weights) != 1:
        return None
    ((key, weight),) = weights.items()
    keyword, content = factors
    ordered = classes(weights, factors)
    token = _table(MemoryToken)

    def posting_hits(taking: Sequence[Posting]) -> _Sql:
        return _sql(
            "SELECT entry_id AS id, CASE WHEN in_keywords THEN %s ELSE %s END AS hits"
            f" FROM {token} WHERE owner_id = %s AND key = %s AND in_keywords IN (%s)",
            keyword * weight,
            content * weight,
            owner_id,
            key,
            _in(sorted({p.in_keywords for p in taking})),
        )

    probe = _sql(f"(%s LIMIT {max(PROBE, 4 * limit):d}) AS h", posting_hits(ordered[:1]))
    floor = _floor(probe, entry, cut)
    if floor is None:
        return None
    most_history, most_salience = most_history_and_salience(config)
    read = to_read(
        weights,
        factors,
        relevance_weight=cut.relevance_weight,
        denominator=cut.denominator,
        ceiling=most_history + most_salience,
        floor=floor,
        reach=cut.reach,
    )
    # The floor is the score of matches in the first class, so that class is always read.
    hits = _sql("hits AS MATERIALIZED (%s)", posting_hits(read or ordered[:1]))
    return NarrowRead(floor, hits, whole=len(read) == len(ordered))


def _floor(probe: _Sql, entry: str, cut: Cut, given: _Sql | None = None) -> float | None:
    """The `limit`-th best score among the matches `probe` (a FROM item `h` of matches and
    their hits, `given` its CTE if any) that the filters admit: a floor the cut can only be
    above, the cut being the `limit`-th best of a superset. None when fewer are admitted."""
    sql = _sql(
        "SELECT CASE WHEN COUNT(*) < %s THEN NULL ELSE MIN(score) END FROM"
        f" (SELECT %s AS score FROM %s JOIN {entry} e ON e.id = h.id WHERE %s"
        " ORDER BY score DESC LIMIT %s) AS best",
        cut.limit,
        cut.score,
        probe,
        cut.conditions,
        cut.limit,
    )
    if given is not None:
        sql = _sql("WITH %s %s", given, sql)
    with connection.cursor() as cursor:
        cursor.execute(sql.text, sql.params)
        ((floor,),) = cursor.fetchall()
    return None if floor is None else float(floor)


@dataclass(frozen=True)
class Matches:
    """Every match of a query (its entry ids) and its hits, as the worker found them from
    held postings (memories.recall.postings), and where the worker holds them, each one's
    salience part of its score (None: the most any memory can have is assumed) and what
    finds entries' memories (`memory_keys`: their ids as halves, semantic.id_halves, or
    None when one is not known)."""

    entries: npt.NDArray[np.int64]
    hits: npt.NDArray[np.int64]
    salience: npt.NDArray[np.float64] | None = None
    memory_keys: Callable[[npt.NDArray[np.int64]], npt.NDArray[np.uint64] | None] | None = None


@dataclass(frozen=True)
class CosineBound:
    """How a recall blending in meaning bounds the reach of its cosine part: `ceiling`
    gives the most cosine (thousandths) the query has with these memories (ids as
    halves, semantic.id_halves) or with any of the owner's (None). A memory scanned
    alone costs the worker about six times its share of a scan of all (its id
    searched, its row copied out): at most `most_chosen` are given."""

    ceiling: Callable[[npt.NDArray[np.uint64] | None], int]
    most_chosen: int


def read_held(
    entry: str, held: Matches, cut: Cut, cosine_bound: CosineBound | None = None
) -> NarrowRead | None:
    """For a query whose matches and their hits the worker found from held postings
    (memories.recall.postings): a floor the cut can only be above, and the CTE `hits` of
    the matches that can score within `reach` of it, handed to the statement as values.
    None when the statement should group every posting itself (`all_hits`): the seed's
    unbounded history, no more matches than the probe, or a probe that found fewer than
    `limit` matches the filters admit.

    The probe scores the PROBE matches with the most hits, as `scoring._cut_by_bound`
    does (which of those tied is of no matter: any matches give a floor). A match is
    handed over when its relevance plus the most history and its salience part (or the
    most any memory can have) reaches the floor less the reach, in the float operations
    of the statement's own bound (which applies it again), with twice its margin to
    spare.

    With `cosine_bound`, the reach's meaning part is bounded by the most cosine among the
    matches that reach the floor less the cut's reach: a match outside those scores below
    the floor less the reach whatever its cosine, and none of those can add more than
    the most of theirs. A scan of those few thousand vectors replaces one of every vector
    the owner has (memories.services.recall), unless they are too many.
    """
    matches, hits = held.entries, held.hits
    config, limit = cut.config, cut.limit
    probe = max(PROBE, 4 * limit)
    if config.history == SEED_HISTORY or cut.denominator <= 0 or len(matches) <= probe:
        return None
    best = np.argpartition(-hits, probe)[:probe]
    floor = _floor(_Sql("h"), entry, cut, given_hits("h", matches[best], hits[best]))
    if floor is None:
        return None
    most_history, most_salience = most_history_and_salience(config)
    relevance = cut.relevance_weight * (hits / float(cut.denominator))
    salience = held.salience if held.salience is not None else most_salience
    score_bound = relevance + (most_history + salience)
    within = score_bound >= floor - cut.reach - 2 * MARGIN
    reach = None
    if cosine_bound is not None and cut.meaning > 0:
        chosen = matches[within]
        keys = None
        if held.memory_keys is not None and len(chosen) <= cosine_bound.most_chosen:
            keys = held.memory_keys(chosen)
        reach = cut.reach_with(min(cut.ceiling, cosine_bound.ceiling(keys)))
        within = score_bound >= floor - reach - 2 * MARGIN
    return NarrowRead(
        floor,
        given_hits("hits", matches[within], hits[within]),
        whole=bool(within.all()),
        reach=reach,
    )


def given_hits(name: str, matches: npt.NDArray[np.int64], hits: npt.NDArray[np.int64]) -> _Sql:
    """The CTE `name` of these matches (entry ids) and their hits, given as parameters:
    two arrays on PostgreSQL, one JSON list of pairs on SQLite (it has no arrays)."""
    if connection.vendor == "postgresql":
        # As array literals: a list of Python integers is adapted one value at a time,
        # several times slower for the thousands of matches a common word hands over.
        return _sql(
            f"{name} AS MATERIALIZED (SELECT r.id, r.hits FROM"
            " unnest(CAST(%s AS bigint[]), CAST(%s AS bigint[])) AS r(id, hits))",
            "{" + ",".join(map(str, matches.tolist())) + "}",
            "{" + ",".join(map(str, hits.tolist())) + "}",
        )
    return _sql(
        f"{name} AS MATERIALIZED (SELECT json_extract(value, '$[0]') AS id,"
        " json_extract(value, '$[1]') AS hits FROM json_each(%s))",
        json.dumps(np.stack([matches, hits], axis=1).tolist()),
    )
