"""What a query of several common words would cost if a worker held their postings
(issue 32, item 1): measured against the statement as it is, on a prepared store.

    .venv/bin/python -m bench.held_postings --database-url URL [--rounds 5] [--out FILE]

A recall of several words groups every posting of its words in SQL to find each match's
hits (memories.recall.impact, `all_hits`): at 100,000 memories three common words hold
30,000–60,000 postings, and SQLite's grouping of them is most of the recall. Here the
postings of the query's words are read once into arrays, as a worker could hold them,
and each recall then counts their document frequencies and groups them in numpy, scores
the matches with the most hits for a floor (one small statement), and hands the scoring
statement only the matches that can score within reach of it, as `impact.read_one_word`
does for one word. The recall is otherwise the service's own (`rank_memories`), so the
rankings are compared whole.

Three ways, in turn: as it is; with the postings held; and with each entry's salience held
too, so that a match's bound takes its own salience rather than the most any memory has
(as the statement's `within_reach` does once it has joined the entry), which leaves
fewer matches to hand over.

For each query size (3, 6 words), 10 queries of words held by 8–50 % of the owner's
memories (the common band of bench.queries, drawn with a fixed seed), each ranked
`--rounds` times each way at one fixed moment; prints per size the median ranking each
way, what reading a query's postings once costs, what the index takes to read them and
to group them by match (`impact.all_hits`) on its own, and whether every ranking is
identical. `--out` writes the same as JSON rows. Reads only: nothing is strengthened.

This measures the gain only: a worker holding postings would have to follow every write
to them (the index has no per-entry change stamp to do it with yet).
"""

import argparse
import importlib
import json
import random
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from bench.database import setup_django
from bench.queries import BANDS

MOMENT = datetime(2026, 12, 5, 17, 0, tzinfo=UTC)
SIZES = (3, 6)


def _inside(module: str) -> Any:
    """A module of recall's own, below its face: this bench stands in for parts of a recall,
    which no interface may reach (tests/memories/test_services.py), so it takes them by
    name, as bench.recall_cut does."""
    return importlib.import_module(f"memories.recall.{module}")


@dataclass(frozen=True)
class Postings:
    """One word's postings as a worker would hold them: each posting's entry and whether
    the word is among that memory's keywords."""

    entries: npt.NDArray[np.int64]
    in_keywords: npt.NDArray[np.bool_]


def read_postings(owner_id: int, keys: Sequence[str]) -> dict[str, Postings]:
    """The owner's postings of these index keys, read once."""
    from django.db import connection

    from memories.models import MemoryToken

    rows: dict[str, tuple[list[int], list[bool]]] = {key: ([], []) for key in keys}
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT key, entry_id, in_keywords FROM {MemoryToken._meta.db_table}"
            f" WHERE owner_id = %s AND key IN ({', '.join(['%s'] * len(keys))})",
            [owner_id, *keys],
        )
        for key, entry, in_keywords in cursor.fetchall():
            rows[key][0].append(entry)
            rows[key][1].append(bool(in_keywords))
    return {
        key: Postings(np.array(entries, dtype=np.int64), np.array(flags, dtype=np.bool_))
        for key, (entries, flags) in rows.items()
    }


def grouped_hits(
    held: Mapping[str, Postings], weights: Mapping[str, int], factors: tuple[int, int]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Each match's entry and its hits (the sum `impact.hits_sum` computes), from the held
    postings of the query's words."""
    keyword, content = factors
    entries = np.concatenate([held[key].entries for key in weights])
    worth = np.concatenate(
        [
            np.where(held[key].in_keywords, keyword * weight, content * weight)
            for key, weight in weights.items()
        ]
    )
    if not len(entries):
        return entries, entries
    low = int(entries.min())
    span = int(entries.max()) - low + 1
    if span <= 4 * len(entries):  # an owner's entries mostly in one run of ids: count by id
        sums = np.bincount(entries - low, weights=worth, minlength=span)
        present = np.flatnonzero(np.bincount(entries - low, minlength=span))
        return present + low, sums[present].astype(np.int64)
    matches, where = np.unique(entries, return_inverse=True)
    return matches, np.bincount(where, weights=worth).astype(np.int64)


def _rows(entries: npt.NDArray[np.int64], hits: npt.NDArray[np.int64]) -> str:
    return json.dumps(list(zip(entries.tolist(), hits.tolist(), strict=True)))


def _given_hits(name: str) -> str:
    """A CTE of (id, hits) rows given as one JSON parameter."""
    from django.db import connection

    if connection.vendor == "postgresql":
        return (
            f"{name} AS MATERIALIZED (SELECT (r->>0)::bigint AS id, (r->>1)::bigint AS hits"
            " FROM jsonb_array_elements(%s::jsonb) AS r)"
        )
    return (
        f"{name} AS MATERIALIZED (SELECT json_extract(value, '$[0]') AS id,"
        " json_extract(value, '$[1]') AS hits FROM json_each(%s))"
    )


@dataclass(frozen=True)
class Saliences:
    """Each entry's salience part of a score (salience_weight × its salience's value), by
    entry id in order, as a worker could hold them beside the postings."""

    entries: npt.NDArray[np.int64]
    parts: npt.NDArray[np.float64]

    def of(self, entries: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
        return self.parts[np.searchsorted(self.entries, entries)]


def read_saliences(owner_id: int) -> Saliences:
    """The salience part of every entry of the owner's, read once."""
    from memories.conf import activation_config
    from memories.models import RecallEntry
    from memories.vocabulary import MEDIUM

    config = activation_config()
    rows = RecallEntry.objects.filter(owner_id=owner_id).order_by("id")
    default = config.salience_scores[MEDIUM]
    entries, parts = [], []
    for entry, salience in rows.values_list("id", "salience").iterator(chunk_size=5000):
        entries.append(entry)
        parts.append(config.salience_weight * config.salience_scores.get(salience, default))
    return Saliences(np.array(entries, dtype=np.int64), np.array(parts, dtype=np.float64))


def held_reader(
    held: Mapping[str, Postings], saliences: Saliences | None = None
) -> Callable[..., Any]:
    """A stand-in for `impact.read_one_word` that, for a query of several words whose
    postings are held, finds the floor and the matches within reach of it from them:
    bounding each match's history and salience together (as the statement does), or,
    with `saliences`, its salience by its own."""
    from django.db import connection

    impact, ranking, sql = _inside("impact"), _inside("ranking"), _inside("sql")
    seed_history, _sql = ranking.SEED_HISTORY, sql._sql

    original = impact.read_one_word

    def read(owner_id: int, entry: str, **named: Any) -> Any:
        """`impact.read_one_word`'s arguments, as scoring.best_candidates passes them."""
        weights, config, denominator = named["weights"], named["config"], named["denominator"]
        if len(weights) < 2 or config.history == seed_history or denominator <= 0:
            return original(owner_id, entry, **named)
        factors, limit, reach = named["factors"], named["limit"], named["reach"]
        matches, hits = grouped_hits(held, weights, factors)
        probe = max(impact.PROBE, 4 * limit)
        if len(matches) <= probe:
            return None
        best = np.argpartition(-hits, probe)[:probe]
        statement = _sql(
            f"WITH {_given_hits('h')} SELECT CASE WHEN COUNT(*) < %s THEN NULL ELSE MIN(score)"
            f" END FROM (SELECT %s AS score FROM h JOIN {entry} e ON e.id = h.id WHERE %s"
            " ORDER BY score DESC LIMIT %s) AS best",
            _rows(matches[best], hits[best]),
            limit,
            named["score"],
            named["conditions"],
            limit,
        )
        with connection.cursor() as cursor:
            cursor.execute(statement.text, statement.params)
            ((floor,),) = cursor.fetchall()
        if floor is None:
            return None
        most_history, most_salience = impact.most_history_and_salience(config)
        ceiling = most_history + (most_salience if saliences is None else saliences.of(matches))
        # The bound of `scoring._cut_by_bound`'s `kept` (with a match's own salience, that
        # of its `within_reach`), twice its margin to spare: the statement applies it again.
        bound = named["relevance_weight"] * (hits / float(denominator)) + ceiling
        within = bound >= float(floor) - reach - 2 * impact.MARGIN
        cte = _sql(_given_hits("hits"), _rows(matches[within], hits[within]))
        return impact.OneWordRead(float(floor), cte, whole=bool(within.all()))

    return read


def held_statistics(held: Mapping[str, Postings]) -> Callable[..., Any]:
    """A stand-in for `scoring.statistics` that counts each held word's postings (its
    document frequency) rather than the index's."""
    import dataclasses

    original = _inside("scoring").statistics

    def statistics(owner_id: int, keys: Sequence[str]) -> Any:
        if not keys or any(key not in held for key in keys):
            return original(owner_id, keys)
        index = original(owner_id, [])
        df = {key: len(held[key].entries) for key in keys if len(held[key].entries)}
        return dataclasses.replace(index, df=df)

    return statistics


@contextmanager
def postings_held(
    held: Mapping[str, Postings], saliences: Saliences | None = None
) -> Iterator[None]:
    """Recall reads the query's postings from `held` rather than the index."""
    impact = vars(_inside("impact"))
    # The module, not the function memories.services exports under its name.
    recall = vars(importlib.import_module("memories.services.recall"))
    read, statistics = impact["read_one_word"], recall["statistics"]
    impact["read_one_word"] = held_reader(held, saliences)
    recall["statistics"] = held_statistics(held)
    try:
        yield
    finally:
        impact["read_one_word"], recall["statistics"] = read, statistics


def grouping_in_sql(owner_id: int, text: str) -> tuple[float, float]:
    """Seconds the index takes to read a query's postings (counting them) and to group
    them by match as recall does (`impact.all_hits`), each alone."""
    from django.db import connection

    from memories.conf import activation_config, ranking_profile
    from memories.models import MemoryToken
    from memories.recall import parse_query, statistics

    impact, sql = _inside("impact"), _inside("sql")
    query_weights, _in, _sql = _inside("ranking").query_weights, sql._in, sql._sql

    profile, config = ranking_profile(), activation_config()
    query = parse_query(text, profile)
    index = statistics(owner_id, query.tokens)
    weights = query_weights(query, profile=profile, live=index.live, df=index.df, config=config)
    reading = _sql(
        f"SELECT COUNT(*) FROM {MemoryToken._meta.db_table} WHERE owner_id = %s AND key IN (%s)",
        owner_id,
        _in(weights),
    )
    grouping = _sql(
        "WITH %s SELECT COUNT(*) FROM hits",
        impact.all_hits(owner_id, weights, profile.factors(config)),
    )
    took = []
    with connection.cursor() as cursor:
        for statement in (reading, grouping):
            started = time.perf_counter()
            cursor.execute(statement.text, statement.params)
            cursor.fetchall()
            took.append(time.perf_counter() - started)
    return took[0], took[1]


MODES = ("as it is", "postings held", "postings and saliences held")


@dataclass
class Measured:
    timings: dict[str, list[float]]  # by mode
    reads: list[float]  # reading a query's postings once
    sql_reads: list[float]  # the index reading them
    sql_groupings: list[float]  # the index grouping them by match
    identical: int  # queries ranked alike by every mode in every round
    queries: int


def common_words(owner_id: int, live: int) -> list[str]:
    from django.db import connection

    from memories.models import MemoryToken

    low, high = BANDS["common"]
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT key FROM {MemoryToken._meta.db_table} WHERE owner_id = %s GROUP BY key"
            " HAVING COUNT(*) BETWEEN %s AND %s ORDER BY key",
            [owner_id, low * live, high * live],
        )
        return [key for (key,) in cursor.fetchall()]


def measure(owner: Any, queries: Sequence[str], *, rounds: int) -> Measured:
    """Each query ranked in each mode (MODES) in turn."""
    from memories.conf import ranking_profile
    from memories.recall import parse_query
    from memories.services import RecallFilters, rank_memories

    saliences = read_saliences(owner.pk)
    result = Measured({mode: [] for mode in MODES}, [], [], [], 0, len(queries))
    for text in queries:
        keys = sorted(set(parse_query(text, ranking_profile()).tokens))
        started = time.perf_counter()
        held = read_postings(owner.pk, keys)
        result.reads.append(time.perf_counter() - started)
        modes: dict[str, Callable[[], AbstractContextManager[None]]] = {
            "as it is": nullcontext,
            "postings held": partial(postings_held, held),
            "postings and saliences held": partial(postings_held, held, saliences),
        }
        rankings = []
        for _ in range(rounds):
            sql_read, sql_grouping = grouping_in_sql(owner.pk, text)
            result.sql_reads.append(sql_read)
            result.sql_groupings.append(sql_grouping)
            for mode, holding in modes.items():
                started = time.perf_counter()
                with holding():
                    ranking = rank_memories(owner, RecallFilters(query=text), now=MOMENT)
                result.timings[mode].append(time.perf_counter() - started)
                rankings.append([(item.candidate.id, item.score) for item in ranking.ranked])
        result.identical += all(ranking == rankings[0] for ranking in rankings)
    return result


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.held_postings")
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    setup_django(args.database_url, migrate=False)

    from django.db import connection

    from memories.models import RecallIndex, User

    index = RecallIndex.objects.order_by("-live_memories").first()
    if index is None:
        sys.exit("The database holds no memories: give a prepared store.")
    owner = User.objects.get(pk=index.owner_id)
    words = common_words(owner.pk, index.live_memories)
    rng = random.Random("taproot-bench-held-postings")
    rows = []
    for size in SIZES:
        queries = [" ".join(rng.sample(words, size)) for _ in range(10)]
        found = measure(owner, queries, rounds=args.rounds)
        row: dict[str, Any] = {
            "database": connection.vendor,
            "memories": index.live_memories,
            "words": size,
            **{f"{mode} (ms)": _ms(found.timings[mode]) for mode in MODES},
            "reading the postings once (ms)": _ms(found.reads),
            "the index reading them (ms)": _ms(found.sql_reads),
            "the index grouping them (ms)": _ms(found.sql_groupings),
            "identical rankings": f"{found.identical} of {found.queries}",
        }
        rows.append(row)
        print(
            f"{size} common words, {index.live_memories:,} memories, ranking medians: "
            + ", ".join(f"{mode} {row[f'{mode} (ms)']} ms" for mode in MODES)
            + f"; reading the postings once {row['reading the postings once (ms)']} ms;"
            f" in SQL, reading them {row['the index reading them (ms)']} ms and grouping them"
            f" {row['the index grouping them (ms)']} ms;"
            f" identical rankings: {row['identical rankings']}"
        )
    if args.out:
        args.out.write_text(json.dumps(rows, indent=1) + "\n")


def _ms(seconds: list[float]) -> float:
    return round(statistics.median(seconds) * 1000, 1)


if __name__ == "__main__":
    main(sys.argv[1:])
