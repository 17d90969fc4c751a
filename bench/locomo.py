"""LoCoMo as a retrieval benchmark: memories, questions, gold evidence, metrics, baselines.

Pure Python. The definitions follow the benchmark the shared reference scorer defines
(../shared/bench/README.md), so figures can be cross-checked through its JSON-lines
`score` command; this is the project's own implementation of them:

- one store per conversation; a memory per observation (`observation` unit) or per
  dialogue turn (`turn` unit: "Speaker: text", plus " [shares a photo: caption]");
  timestamps from the session's date; gist = the first 15 words;
- questions of categories 1–4 whose evidence names at least one existing turn, asked
  after the conversation's last session;
- a memory covers the dialogue ids it came from; R@k is the share of a question's
  evidence ids covered by the top k, MRR@10 the reciprocal rank of the first memory that
  covers any of them (0 past rank 10); means per category and over all questions.
"""

import json
import math
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memories.recall import STOP_WORDS  # the baselines ignore the words recall ignores

UNITS = ("observation", "turn")
CATEGORY_NAMES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
# The order of the LoCoMo paper's tables.
CATEGORY_ORDER = ("single-hop", "multi-hop", "temporal", "open-domain")
GIST_WORDS = 15
RECALL_AT = (5, 10)
MRR_CUTOFF = 10
SESSION_DATE = "%I:%M %p on %d %B, %Y"  # "1:56 pm on 8 May, 2023"

_DIALOGUE_ID = re.compile(r"D:?(\d+):(\d+)")
_SESSION_KEY = re.compile(r"session_(\d+)")


@dataclass(frozen=True)
class UnitMemory:
    key: str  # e.g. "conv-26:D1:3" or "conv-26:obs:S1:0"
    conversation: str
    seq: int
    created_at: datetime
    content: str
    gist: str
    sources: frozenset[str]


@dataclass(frozen=True)
class Question:
    key: str  # "conv-26:q000": the question's position among all of the sample's QA items
    conversation: str
    text: str
    category: str
    asked_at: datetime
    evidence: frozenset[str]


@dataclass(frozen=True)
class Benchmark:
    unit: str
    memories: list[UnitMemory]
    questions: list[Question]

    def by_conversation(self) -> dict[str, list[UnitMemory]]:
        grouped: dict[str, list[UnitMemory]] = defaultdict(list)
        for memory in self.memories:
            grouped[memory.conversation].append(memory)
        return dict(grouped)

    def coverage(self) -> dict[str, frozenset[str]]:
        return {m.key: m.sources for m in self.memories}


def dialogue_ids(raw: Any) -> list[str]:
    """Evidence references as canonical "D<session>:<turn>" ids.

    Accepts a list or a string, several ids in one string ("D8:6; D9:17", "D9:1 D4:4"),
    a stray colon ("D:11:26") and zero padding ("D30:05"); anything else is dropped.
    """
    found: list[str] = []
    for item in raw if isinstance(raw, list | tuple) else [raw]:
        for piece in re.split(r"[;,\s]+", str(item)):
            match = _DIALOGUE_ID.fullmatch(piece.strip())
            if match:
                canonical = f"D{int(match.group(1))}:{int(match.group(2))}"
                if canonical not in found:
                    found.append(canonical)
    return found


def first_words(text: str, count: int = GIST_WORDS) -> str:
    words = text.split()
    return " ".join(words[:count]) + (" ..." if len(words) > count else "")


def turn_text(turn: dict[str, Any]) -> str:
    text = f"{turn['speaker']}: {str(turn.get('text', '')).strip()}"
    if turn.get("blip_caption"):
        text += f" [shares a photo: {str(turn['blip_caption']).strip()}]"
    return text


def read_dataset(path: Path) -> list[dict[str, Any]]:
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, list) or not data or "conversation" not in data[0]:
        raise ValueError(
            f"{path} is not a LoCoMo-format file (a list of samples with a conversation)"
        )
    return data


def _sessions(conversation: dict[str, Any]) -> list[int]:
    numbers = []
    for key, value in conversation.items():
        match = _SESSION_KEY.fullmatch(key)
        if match and isinstance(value, list) and value:
            numbers.append(int(match.group(1)))
    return sorted(numbers)


def session_moment(text: str) -> datetime:
    """A session's date-time, which the data gives without a zone, taken as UTC."""
    return datetime.strptime(text.strip(), SESSION_DATE).replace(tzinfo=UTC)


def build(data: list[dict[str, Any]], unit: str) -> Benchmark:
    if unit not in UNITS:
        raise ValueError(f"unit must be one of {', '.join(UNITS)}")
    memories: list[UnitMemory] = []
    questions: list[Question] = []
    for sample in data:
        conv_id = str(sample["sample_id"])
        conversation = sample["conversation"]
        sessions = _sessions(conversation)
        dates = {s: session_moment(conversation[f"session_{s}_date_time"]) for s in sessions}
        turns = {
            canonical
            for s in sessions
            for turn in conversation[f"session_{s}"]
            for canonical in dialogue_ids(turn["dia_id"])
        }
        seq = 0
        for s in sessions:
            if unit == "turn":
                for turn in conversation[f"session_{s}"]:
                    text = turn_text(turn)
                    memories.append(
                        UnitMemory(
                            key=f"{conv_id}:{turn['dia_id']}",
                            conversation=conv_id,
                            seq=seq,
                            created_at=dates[s],
                            content=text,
                            gist=first_words(text),
                            sources=frozenset(dialogue_ids(turn["dia_id"])),
                        )
                    )
                    seq += 1
                continue
            observed = (sample.get("observation") or {}).get(f"session_{s}_observation") or {}
            position = 0
            for items in observed.values():
                for item in items:
                    text, reference = (
                        (item[0], item[1]) if isinstance(item, list | tuple) else (item, [])
                    )
                    memories.append(
                        UnitMemory(
                            key=f"{conv_id}:obs:S{s}:{position}",
                            conversation=conv_id,
                            seq=seq,
                            created_at=dates[s],
                            content=text.strip(),
                            gist=first_words(text),
                            sources=frozenset(d for d in dialogue_ids(reference) if d in turns),
                        )
                    )
                    position += 1
                    seq += 1
        asked_at = dates[sessions[-1]]
        for index, qa in enumerate(sample["qa"]):
            category = CATEGORY_NAMES.get(int(qa["category"]))
            if category is None:  # 5: adversarial, not scored
                continue
            evidence = frozenset(d for d in dialogue_ids(qa.get("evidence", [])) if d in turns)
            if not evidence:
                continue
            questions.append(
                Question(
                    key=f"{conv_id}:q{index:03d}",
                    conversation=conv_id,
                    text=str(qa["question"]).strip(),
                    category=category,
                    asked_at=asked_at,
                    evidence=evidence,
                )
            )
    return Benchmark(unit=unit, memories=memories, questions=questions)


# ---- metrics -----------------------------------------------------------------------


def score_question(
    ranked: Sequence[str], evidence: frozenset[str], coverage: dict[str, frozenset[str]]
) -> dict[str, float]:
    """R@5, R@10 and MRR@10 of one ranked list (duplicates count once, unknown ids miss)."""
    unique = list(dict.fromkeys(ranked))
    scores: dict[str, float] = {}
    for k in RECALL_AT:
        covered: set[str] = set()
        for key in unique[:k]:
            covered |= coverage.get(key, frozenset()) & evidence
        scores[f"R@{k}"] = len(covered) / len(evidence)
    scores[f"MRR@{MRR_CUTOFF}"] = 0.0
    for rank, key in enumerate(unique[:MRR_CUTOFF], 1):
        if coverage.get(key, frozenset()) & evidence:
            scores[f"MRR@{MRR_CUTOFF}"] = 1.0 / rank
            break
    return scores


def score(benchmark: Benchmark, results: dict[str, list[str]]) -> dict[str, dict[str, float]]:
    """Mean metrics per category and overall; a question without results scores 0."""
    coverage = benchmark.coverage()
    rows: dict[str, list[dict[str, float]]] = defaultdict(list)
    for question in benchmark.questions:
        row = score_question(results.get(question.key, []), question.evidence, coverage)
        rows[question.category].append(row)
        rows["overall"].append(row)
    table: dict[str, dict[str, float]] = {}
    for category in (*CATEGORY_ORDER, "overall"):
        if rows.get(category):
            items = rows[category]
            table[category] = {"n": len(items)} | {
                metric: round(sum(r[metric] for r in items) / len(items), 4) for metric in items[0]
            }
    return table


# ---- baselines -----------------------------------------------------------------------

_WORD = re.compile(r"[a-z0-9]+")

Ranker = Callable[[Question], list[str]]


def words(text: str) -> list[str]:
    return [w for w in _WORD.findall(text.lower()) if w not in STOP_WORDS]


def overlap_ranker(memories: Sequence[UnitMemory]) -> Ranker:
    """Score = distinct query words found in the memory. Among equals, the memory where
    those words make up a larger share of its own words first, then memory order."""
    documents = [(m.key, frozenset(words(m.content))) for m in memories]

    def rank(question: Question) -> list[str]:
        asked = frozenset(words(question.text))
        order = []
        for position, (key, document) in enumerate(documents):
            shared = len(asked & document)
            focus = shared / len(document) if document else 0.0
            order.append((-shared, -focus, position, key))
        order.sort()
        return [key for *_, key in order]

    return rank


class BM25:
    """Okapi BM25 with k1 = 1.5, b = 0.75 and idf = ln(1 + (N − df + 0.5) / (df + 0.5))."""

    def __init__(self, documents: Sequence[Sequence[str]], k1: float = 1.5, b: float = 0.75):
        self.k1 = k1
        self.b = b
        self.lengths = [len(d) for d in documents]
        self.average = (sum(self.lengths) / len(documents)) if documents else 0.0
        self.postings: dict[str, list[tuple[int, int]]] = defaultdict(list)
        for index, document in enumerate(documents):
            for word, count in Counter(document).items():
                self.postings[word].append((index, count))
        total = len(documents)
        self.idf = {
            word: math.log(1.0 + (total - len(p) + 0.5) / (len(p) + 0.5))
            for word, p in self.postings.items()
        }

    def scores(self, query: Iterable[str]) -> list[float]:
        result = [0.0] * len(self.lengths)
        average = self.average or 1.0
        for word in query:  # a repeated query word counts each time
            idf = self.idf.get(word)
            if idf is None:
                continue
            for index, count in self.postings[word]:
                norm = count + self.k1 * (1.0 - self.b + self.b * self.lengths[index] / average)
                result[index] += idf * count * (self.k1 + 1.0) / norm
        return result


def bm25_ranker(memories: Sequence[UnitMemory]) -> Ranker:
    index = BM25([words(m.content) for m in memories])
    keys = [m.key for m in memories]

    def rank(question: Question) -> list[str]:
        scores = index.scores(words(question.text))
        return [keys[i] for i in sorted(range(len(keys)), key=lambda i: (-scores[i], i))]

    return rank


BASELINES: dict[str, Callable[[Sequence[UnitMemory]], Ranker]] = {
    "word overlap": overlap_ranker,
    "BM25": bm25_ranker,
}


def run_ranker(
    benchmark: Benchmark, factory: Callable[[Sequence[UnitMemory]], Ranker], depth: int = 50
) -> dict[str, list[str]]:
    """Each conversation indexed on its own; every question ranked against its own."""
    rankers = {conv: factory(ms) for conv, ms in benchmark.by_conversation().items()}
    return {q.key: rankers[q.conversation](q)[:depth] for q in benchmark.questions}


def write_results(path: Path, results: dict[str, list[str]]) -> None:
    """The reference scorer's input: one {"query_id", "ranked_ids"} line per question."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as out:
        for key, ranked in results.items():
            out.write(json.dumps({"query_id": key, "ranked_ids": ranked}) + "\n")
