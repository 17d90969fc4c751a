"""Retrieval under use: LoCoMo's questions asked one after another through the real
`recall`, which strengthens what it returns exactly as it does for Claude.

The static run (bench.retrieval) asks every question of a store nobody has recalled
from; this one shows what retrieval history does to the ranking. The protocol, on the
stores bench.retrieval loads (one owner per conversation, every memory created and
updated at its session's date-time, UTC):

- T0 = the conversation's last session + 1 day; its questions in file order, question i
  asked at T0 + i × 8 hours (3 a day), each one `mcp_bridge.handlers.recall(query,
  limit=10)` with that moment as now, so strengthening and decay happen as in the product;
- the replies scored as the static run scores its rankings, plus R@10 per third of each
  conversation's questions in replay order;
- after the replay, the retrieval-count distribution of the stores' memories and how many
  memories hold half of all top-10 places;
- the probes: for each of the 5 most-recalled memories H of a conversation, the word H
  holds that most memories hold and that some never-recalled memory C holds too, plus C's
  two rarest words that H lacks (C: of the never-recalled memories holding that word and
  two H lacks, the one whose two are rarest, then the first in the conversation). Asked
  read-only, after the replay and again with every count reset: `cold_first` is the
  share of probes where C ranks first, `hot_above_cold` the share where H ranks above C.
  Words are the taproot profile's tokens, whatever the ranking replayed, so every ranking
  meets the same kind of probe.
"""

import math
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.models import F

from bench import locomo
from mcp_bridge.handlers import recall, recall_filters
from memories.models import Memory, RecallEntry
from memories.recall import TAPROOT, index_entries, index_key, memory_terms, words
from memories.services import rank_memories

START_AFTER = timedelta(days=1)
QUESTION_GAP = timedelta(hours=8)
LIMIT = 10
HOT_PER_CONVERSATION = 5
RARE_WORDS = 2
PROBE_DEPTH = 50


@dataclass(frozen=True)
class Probe:
    conversation: str
    hot: str  # memory keys
    cold: str
    query: str


@dataclass(frozen=True)
class Replayed:
    results: dict[str, list[str]]  # question key → the memory keys recall returned
    finished: dict[str, datetime]  # conversation → the moment after its last question


def replay(
    benchmark: locomo.Benchmark, owners: dict[str, Any], keys: dict[uuid.UUID, str]
) -> Replayed:
    """Every question through `recall`, in the protocol's order and at its moments."""
    results: dict[str, list[str]] = {}
    finished: dict[str, datetime] = {}
    for conversation, questions in by_conversation(benchmark.questions).items():
        start = questions[0].asked_at + START_AFTER
        for i, question in enumerate(questions):
            reply = recall(
                owner=owners[conversation],
                query=question.text,
                limit=LIMIT,
                now=start + i * QUESTION_GAP,
            )
            results[question.key] = [keys[uuid.UUID(r["id"])] for r in reply["results"]]
        finished[conversation] = start + len(questions) * QUESTION_GAP
    return Replayed(results, finished)


def by_conversation(questions: Iterable[locomo.Question]) -> dict[str, list[locomo.Question]]:
    grouped: dict[str, list[locomo.Question]] = defaultdict(list)
    for question in questions:
        grouped[question.conversation].append(question)
    return dict(grouped)


def terciles(benchmark: locomo.Benchmark, results: dict[str, list[str]]) -> list[dict[str, Any]]:
    """R@10 over the first, second and last third of each conversation's questions."""
    coverage = benchmark.coverage()
    thirds: list[list[float]] = [[], [], []]
    for questions in by_conversation(benchmark.questions).values():
        for i, question in enumerate(questions):
            scores = locomo.score_question(
                results.get(question.key, []), question.evidence, coverage
            )
            thirds[3 * i // len(questions)].append(scores["R@10"])
    return [
        {"n": len(third), "R@10": round(sum(third) / len(third), 4) if third else 0.0}
        for third in thirds
    ]


def percentile(values: Sequence[int], share: float) -> int:
    """The nearest-rank percentile of sorted values."""
    if not values:
        return 0
    return values[max(0, math.ceil(share * len(values)) - 1)]


def counts(owners: dict[str, Any], results: dict[str, list[str]]) -> dict[str, int]:
    """How recalls spread over the stores' memories once the replay is over."""
    stored = sorted(
        Memory.objects.filter(owner__in=list(owners.values())).values_list(
            "retrieval_count", flat=True
        )
    )
    places = Counter(key for ranked in results.values() for key in ranked[:LIMIT])
    total = sum(places.values())
    held, holders = 0, 0
    for _, n in places.most_common():
        if 2 * held >= total:
            break
        held += n
        holders += 1
    return {
        "memories": len(stored),
        "max": stored[-1] if stored else 0,
        "p99": percentile(stored, 0.99),
        "p90": percentile(stored, 0.90),
        "never_recalled": sum(1 for n in stored if n == 0),
        "top10_places": total,
        "half_of_places_held_by": holders,
    }


def _terms(memory: locomo.UnitMemory) -> frozenset[str]:
    terms = memory_terms(
        gist=memory.gist, content=memory.content, tags=(), search_keywords=(), profile=TAPROOT
    )
    return frozenset(index_entries(terms))


def _surface(memory: locomo.UnitMemory, key: str) -> str:
    """A word of the memory's text that the taproot profile reads as this index key."""
    for word in words(f"{memory.gist} {memory.content}"):
        if any(index_key(token) == key for token in TAPROOT.tokenize(word)):
            return word
    raise ValueError(f"{memory.key} holds no word for {key!r}")


def choose_probes(
    benchmark: locomo.Benchmark, owners: dict[str, Any], keys: dict[uuid.UUID, str]
) -> list[Probe]:
    """The protocol's probes, from the counts the replay left."""
    recalled = {
        keys[pk]: n
        for pk, n in Memory.objects.filter(owner__in=list(owners.values())).values_list(
            "id", "retrieval_count"
        )
        if pk in keys
    }
    probes: list[Probe] = []
    for conversation, memories in benchmark.by_conversation().items():
        terms = {m.key: _terms(m) for m in memories}
        df = Counter(t for held in terms.values() for t in held)
        cold = [m for m in memories if recalled.get(m.key, 0) == 0]
        hot = sorted(
            (m for m in memories if recalled.get(m.key, 0) > 0),
            key=lambda m: (-recalled[m.key], m.seq),
        )[:HOT_PER_CONVERSATION]
        for h in hot:
            probe = _probe(conversation, h, terms, df, cold)
            if probe is not None:
                probes.append(probe)
    return probes


def _probe(
    conversation: str,
    hot: locomo.UnitMemory,
    terms: dict[str, frozenset[str]],
    df: Counter[str],
    cold: list[locomo.UnitMemory],
) -> Probe | None:
    for shared in sorted(terms[hot.key], key=lambda t: (-df[t], t)):
        choices = []
        for c in cold:
            if shared not in terms[c.key]:
                continue
            lacking = sorted(terms[c.key] - terms[hot.key], key=lambda t: (df[t], t))
            if len(lacking) >= RARE_WORDS:
                rare = lacking[:RARE_WORDS]
                choices.append(([df[t] for t in rare], c.seq, c, rare))
        if choices:
            *_, c, rare = min(choices, key=lambda choice: (choice[0], choice[1]))
            query = " ".join([_surface(hot, shared), *(_surface(c, t) for t in rare)])
            return Probe(conversation, hot.key, c.key, query)
    return None


def probe_ranks(
    probes: Sequence[Probe],
    owners: dict[str, Any],
    keys: dict[uuid.UUID, str],
    at: dict[str, datetime],
) -> list[tuple[int | None, int | None]]:
    """Each probe ranked read-only at the moment its conversation's replay ended: where H
    and where C came (1 = first; None = not among the first PROBE_DEPTH)."""
    places = []
    for probe in probes:
        ranking = rank_memories(
            owners[probe.conversation],
            recall_filters(query=probe.query, limit=PROBE_DEPTH)[0],
            now=at[probe.conversation],
        )
        ranked = [keys[item.candidate.id] for item in ranking.ranked]
        places.append((_place(ranked, probe.hot), _place(ranked, probe.cold)))
    return places


def _place(ranked: list[str], key: str) -> int | None:
    return ranked.index(key) + 1 if key in ranked else None


def probe_summary(places: Sequence[tuple[int | None, int | None]]) -> dict[str, float | int]:
    """`cold_first`: the share of probes where C came first; `hot_above_cold`: where H came
    above C (C beyond the depth counts as below)."""
    n = len(places)
    cold_first = sum(cold == 1 for _, cold in places)
    hot_above_cold = sum(hot is not None and (cold is None or hot < cold) for hot, cold in places)
    return {
        "n": n,
        "cold_first": round(cold_first / n, 4) if n else 0.0,
        "hot_above_cold": round(hot_above_cold / n, 4) if n else 0.0,
    }


def reset_counts(owners: dict[str, Any]) -> None:
    """Forget every recall of these stores, as if nobody had ever recalled from them."""
    users = list(owners.values())
    Memory.objects.filter(owner__in=users).update(
        retrieval_count=0, last_retrieved=None, last_touched_at=F("updated_at")
    )
    RecallEntry.objects.filter(owner__in=users).update(retrieval_count=0, last_retrieved_us=None)


def run(
    benchmark: locomo.Benchmark, owners: dict[str, Any], keys: dict[uuid.UUID, str]
) -> tuple[dict[str, list[str]], dict[str, Any]]:
    """The replay on stores nobody has recalled from: its results, and what it left."""
    replayed = replay(benchmark, owners, keys)
    probes = choose_probes(benchmark, owners, keys)
    after_replay = probe_ranks(probes, owners, keys, replayed.finished)
    facts: dict[str, Any] = {
        "counts": counts(owners, replayed.results),
        "terciles": terciles(benchmark, replayed.results),
    }
    reset_counts(owners)
    after_reset = probe_ranks(probes, owners, keys, replayed.finished)
    facts["probes"] = {
        "after_replay": probe_summary(after_replay),
        "after_reset": probe_summary(after_reset),
        "cases": [
            {
                "query": probe.query,
                "hot": probe.hot,
                "cold": probe.cold,
                "after_replay": {"hot_rank": replay_hot, "cold_rank": replay_cold},
                "after_reset": {"hot_rank": reset_hot, "cold_rank": reset_cold},
            }
            for probe, (replay_hot, replay_cold), (reset_hot, reset_cold) in zip(
                probes, after_replay, after_reset, strict=True
            )
        ],
    }
    return replayed.results, facts
