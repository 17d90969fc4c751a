"""What Claude sees at the start: LoCoMo replayed with the product's own `reflect` before
each simulated conversation, scored by how much of what the conversation goes on to ask
the payload already shows (issue 33).

A question's hit is the share of its evidence dialogue ids covered by memories the payload
shows, in full (a core memory) or as a line (a core_overflow or catalog line); a memory
covers the dialogue ids it came from (bench.locomo). Two protocols, on one owner per
conversation, each memory created at its session's date-time (UTC):

- static: the usage replay (bench.replay) on the store loaded whole (bench.retrieval):
  question i of a conversation asked through the real `recall` at T0 + i × 8 hours, and
  before every third one (a conversation of 3 questions) a payload at that moment;
- growing: each session written through the real `remember` at its date-time, and a
  payload at each session's start (before its memories are written, so it sees only the
  past); a question is asked (scored against that payload) in a session after the first
  memory covering each of its evidence ids was written, chosen by a fixed seed among the
  later sessions and the moment a day after the last one (the only choice for evidence
  from the last session). Nothing is recalled: the catalog's order is the writing's.

Every payload is `memories.services.reflect` as it ships, at each budget of BUDGETS in
turn on the same store (it reads only). Per unit, protocol and budget: `hit_rate` (the
mean over questions), `tokens_mean` (over the payloads questions were asked under) and
`hits_per_1k_tokens` (the questions' hits summed, per 1,000 of those payloads' tokens:
what a token of the payload buys); per unit, `reachable`: the hit rate of a payload that
showed every memory.
"""

import random
import sys
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from django.test import override_settings
from tqdm import tqdm

from bench import locomo, retrieval
from bench.loading import ensure_users
from bench.replay import QUESTION_GAP, START_AFTER, by_conversation
from mcp_bridge.handlers import recall, remember
from memories.payload_entries import ReflectPayload
from memories.services import reflect

PROTOCOLS = ("static", "growing")
BUDGETS = (2_000, 4_000, 8_000)
QUESTIONS_PER_PAYLOAD = 3  # static: one simulated conversation
RECALL_LIMIT = 10
SEED = 33
# The growing stores' owners, apart from the static run's (bench.retrieval's).
GROWING_VARIANT = 7


@dataclass
class Moment:
    """A payload at `at`, once per budget, and the questions asked under it."""

    conversation: str
    at: datetime
    questions: list[locomo.Question] = field(default_factory=list)


@dataclass
class Tally:
    """What one protocol at one budget gathered."""

    hits: list[float] = field(default_factory=list)  # one per question
    tokens: list[int] = field(default_factory=list)  # one per payload asked under
    over_budget: int = 0

    def summary(self) -> dict[str, Any]:
        asked = sum(self.hits)
        spent = sum(self.tokens)
        return {
            "questions": len(self.hits),
            "payloads": len(self.tokens),
            "hit_rate": round(asked / len(self.hits), 4) if self.hits else 0.0,
            "hits_per_1k_tokens": round(1000 * asked / spent, 4) if spent else 0.0,
            "tokens_mean": round(spent / len(self.tokens), 1) if self.tokens else 0.0,
            "over_budget": self.over_budget,
        }


def hit(
    evidence: frozenset[str], shown: Iterable[str], coverage: dict[str, frozenset[str]]
) -> float:
    """The share of `evidence` covered by the memories (keys) shown."""
    covered: set[str] = set()
    for key in shown:
        covered |= coverage.get(key, frozenset()) & evidence
    return len(covered) / len(evidence)


def shown_ids(payload: ReflectPayload) -> list[str]:
    """The memories a payload shows in full or as a line (whole ids); the ids a core
    memory only links to are not shown."""
    core = [e.id for e in (*payload.core_full, *payload.core_lines)]
    return core + [e.id for e in payload.included]


def reachable(benchmark: locomo.Benchmark) -> float:
    """The hit rate of a payload that showed every memory of each conversation."""
    coverage = benchmark.coverage()
    keys = defaultdict(list)
    for memory in benchmark.memories:
        keys[memory.conversation].append(memory.key)
    hits = [hit(q.evidence, keys[q.conversation], coverage) for q in benchmark.questions]
    return round(sum(hits) / len(hits), 4) if hits else 0.0


class Scorer:
    """Takes a payload at each budget at a moment and scores the questions under it."""

    def __init__(self, benchmark: locomo.Benchmark, budgets: Sequence[int]) -> None:
        self.coverage = benchmark.coverage()
        self.budgets = list(budgets)
        self.tallies = {budget: Tally() for budget in self.budgets}

    def score(
        self,
        owner: Any,
        moment: Moment,
        keys: Callable[[str], Iterable[str]],
    ) -> None:
        if not moment.questions:
            return
        for budget in self.budgets:
            with override_settings(REFLECT_MAX_TOKENS=budget):
                payload = reflect(owner=owner, now=moment.at)
            shown = [key for pk in shown_ids(payload) for key in keys(pk)]
            tally = self.tallies[budget]
            tally.tokens.append(payload.tokens)
            tally.over_budget += payload.tokens > budget
            tally.hits.extend(hit(q.evidence, shown, self.coverage) for q in moment.questions)

    def summary(self) -> dict[str, Any]:
        return {str(budget): self.tallies[budget].summary() for budget in self.budgets}


def shown_like_random(unit: str, conversation_number: int, seq: int, variant: int) -> uuid.UUID:
    """bench.retrieval's ids with the memory's place first: they sort alike within a store
    (so recall breaks ties as in the usage replay), and differ in their first 8 characters
    as random ids almost always do, so each is shown by 8 as in use (bench.retrieval's
    share them, and would be shown by some 30)."""
    rest = retrieval.memory_id(unit, conversation_number, 0, variant).int >> 32
    return uuid.UUID(int=(seq << 96) | (rest & ((1 << 96) - 1)))


def static(
    benchmark: locomo.Benchmark, budgets: Sequence[int], progress: "Progress"
) -> dict[str, Any]:
    """The usage replay on the whole store, a payload before every 3 questions."""
    owners, stored = retrieval.load(benchmark, id_for=shown_like_random)
    names = {str(pk): [key] for pk, key in stored.items()}
    scorer = Scorer(benchmark, budgets)
    for conversation, questions in by_conversation(benchmark.questions).items():
        start = questions[0].asked_at + START_AFTER
        for first in range(0, len(questions), QUESTIONS_PER_PAYLOAD):
            group = questions[first : first + QUESTIONS_PER_PAYLOAD]
            at = start + first * QUESTION_GAP
            scorer.score(owners[conversation], Moment(conversation, at, group), names.__getitem__)
            for i, question in enumerate(group):
                # Through the real recall, which strengthens what it returns.
                recall(
                    owner=owners[conversation],
                    query=question.text,
                    limit=RECALL_LIMIT,
                    now=start + (first + i) * QUESTION_GAP,
                )
            progress.advance(len(group))
    return scorer.summary()


def sessions(
    benchmark: locomo.Benchmark,
) -> dict[str, list[tuple[datetime, list[locomo.UnitMemory]]]]:
    """Each conversation's sessions in order: their date-time and the memories said then."""
    grouped: dict[str, dict[datetime, list[locomo.UnitMemory]]] = defaultdict(dict)
    for memory in benchmark.memories:
        grouped[memory.conversation].setdefault(memory.created_at, []).append(memory)
    return {conv: sorted(by_time.items()) for conv, by_time in grouped.items()}


def growing_moments(benchmark: locomo.Benchmark, seed: int = SEED) -> dict[str, list[Moment]]:
    """Per conversation, a moment at each session's start and one a day after the last,
    each with the questions asked under its payload (chosen by `seed`)."""
    # When a dialogue id was first covered by a memory (of its own conversation).
    said_at: dict[tuple[str, str], datetime] = {}
    for memory in benchmark.memories:
        for source in memory.sources:
            key = (memory.conversation, source)
            said_at[key] = min(said_at.get(key, memory.created_at), memory.created_at)
    moments: dict[str, list[Moment]] = {}
    by_session = sessions(benchmark)
    for conversation, questions in by_conversation(benchmark.questions).items():
        starts = [at for at, _ in by_session.get(conversation, [])]
        last = starts[-1] if starts else questions[0].asked_at
        timeline = [Moment(conversation, at) for at in [*starts, last + START_AFTER]]
        chooser = random.Random(f"{seed}:{conversation}")
        for question in questions:
            # Evidence no memory covers has no session here: it cannot be shown anyway.
            latest = max(
                (
                    said_at[conversation, d]
                    for d in question.evidence
                    if (conversation, d) in said_at
                ),
                default=None,
            )
            later = [m for m in timeline if latest is None or m.at > latest]
            chooser.choice(later).questions.append(question)
        moments[conversation] = timeline
    return moments


def growing(
    benchmark: locomo.Benchmark, budgets: Sequence[int], progress: "Progress", seed: int = SEED
) -> dict[str, Any]:
    """Each session written through the real `remember` at its time, a payload at each
    start."""
    owner_of = {
        conv: f"locomo-{GROWING_VARIANT}-{benchmark.unit}-{conv}"
        for conv in benchmark.by_conversation()
    }
    users = ensure_users(owner_of.values())
    scorer = Scorer(benchmark, budgets)
    by_session = sessions(benchmark)
    for conversation, moments in growing_moments(benchmark, seed).items():
        owner = users[owner_of[conversation]]
        written = dict(by_session.get(conversation, []))
        names: dict[str, list[str]] = defaultdict(list)
        for moment in moments:
            scorer.score(owner, moment, names.__getitem__)
            progress.advance(len(moment.questions))
            for memory in written.get(moment.at, []):
                reply = remember(
                    owner=owner,
                    category="episodic",
                    content=memory.content,
                    gist=memory.gist,
                    salience="medium",
                    now=moment.at,
                )
                # A repeat within the retry window is the memory it repeats.
                names[reply["memory_id"]].append(memory.key)
    return scorer.summary()


class Progress:
    """Questions scored, on a terminal; nothing without one."""

    def __init__(self, total: int, label: str) -> None:
        self.bar = tqdm(
            total=total, desc=label, unit=" questions", disable=not sys.stderr.isatty(),
            file=sys.stderr,
        )  # fmt: skip

    def advance(self, n: int) -> None:
        self.bar.update(n)

    def close(self) -> None:
        self.bar.close()


@contextmanager
def progress(total: int, label: str) -> Iterator[Progress]:
    bar = Progress(total, label)
    try:
        yield bar
    finally:
        bar.close()


PROTOCOL_RUNS = {"static": static, "growing": growing}


def run(
    *,
    data_path: Path,
    budgets: Sequence[int] = BUDGETS,
    protocols: Sequence[str] = PROTOCOLS,
    units: Sequence[str] = locomo.UNITS,
) -> dict[str, Any]:
    """Every unit and protocol at every budget (call after bench.database.setup_django,
    on an empty database): `context.<unit>.<protocol>.<budget>` and
    `context.<unit>.reachable`."""
    data = locomo.read_dataset(data_path)
    report: dict[str, Any] = {"data": str(data_path), "budgets": list(budgets)}
    for unit in units:
        benchmark = locomo.build(data, unit)
        unit_report: dict[str, Any] = {
            "memories": len(benchmark.memories),
            "questions": len(benchmark.questions),
            "conversations": len(benchmark.by_conversation()),
            "reachable": reachable(benchmark),
        }
        for protocol in protocols:
            with progress(len(benchmark.questions), f"context {unit} {protocol}") as bar:
                unit_report[protocol] = PROTOCOL_RUNS[protocol](benchmark, budgets, bar)
        report[unit] = unit_report
    return report
