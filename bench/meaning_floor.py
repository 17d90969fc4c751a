"""How precise recall by meaning alone is at each cosine floor, on LoCoMo.

SPEC §3.2 lets a memory that shares no word with the query take a place left over when
its cosine reaches a named floor, chosen on the development data for precision. This
measures that choice: for every question of the development split and every memory of
its conversation that shares no index key with it (what meaning alone could add), the
cosine Taproot computes (memories.recall.semantic, in thousandths); then, for each floor, how
many such pairs reach it and what share of them hold one of the question's evidence
turns.

    .venv/bin/python -m bench.meaning_floor [--locomo PATH] [--unit observation|turn]
        [--embedder wordllama|minilm|onnx:PATH]

Nothing here touches a database or Django; the embedder is one recall can use (wordllama,
the default, or the one named), embedding memories and questions as recall does.
"""

import argparse
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from bench import locomo
from bench.shared import locomo_dev_split

FLOORS = (200, 250, 300, 350, 380, 400, 420, 440, 460, 480, 490, 500, 550, 600)


@dataclass(frozen=True)
class Pair:
    """A question and a memory that shares no word with it."""

    question: str
    cosine: int  # thousandths
    evidence: bool  # the memory holds one of the question's evidence turns


@dataclass(frozen=True)
class FloorPrecision:
    floor: int
    pairs: int  # pairs whose cosine reaches the floor
    evidence: int  # of those, pairs whose memory holds evidence
    questions: int  # questions with at least one such pair

    @property
    def precision(self) -> float | None:
        return self.evidence / self.pairs if self.pairs else None


def precision_by_floor(pairs: Sequence[Pair], floors: Iterable[int]) -> list[FloorPrecision]:
    rows = []
    for floor in floors:
        reached = [pair for pair in pairs if pair.cosine >= floor]
        rows.append(
            FloorPrecision(
                floor=floor,
                pairs=len(reached),
                evidence=sum(pair.evidence for pair in reached),
                questions=len({pair.question for pair in reached}),
            )
        )
    return rows


def meaning_only_pairs(benchmark: locomo.Benchmark, embedder_name: str = "wordllama") -> list[Pair]:
    """Every (question, memory of its conversation sharing no index key) pair, with the
    cosine recall would compute."""
    from memories import recall
    from memories.recall import TAPROOT, embedder_named, index_key, memory_terms, parse_query

    embedder = embedder_named(embedder_name)
    assert embedder is not None
    grouped = benchmark.by_conversation()
    stored: dict[str, list[tuple[locomo.UnitMemory, frozenset[str], bytes]]] = {}
    for conversation, memories in grouped.items():
        texts = [
            recall.memory_text(gist=m.gist, content=m.content, tags=(), keywords=())
            for m in memories
        ]
        vectors = embedder.embed(texts)
        stored[conversation] = []
        for memory, vector in zip(memories, vectors, strict=True):
            terms = memory_terms(
                gist=memory.gist,
                content=memory.content,
                tags=(),
                search_keywords=(),
                profile=TAPROOT,
            )
            keys = frozenset(index_key(t) for t in terms.keywords | terms.content_only)
            stored[conversation].append((memory, keys, recall.stored(vector)))
    pairs = []
    for question in benchmark.questions:
        query = parse_query(question.text, TAPROOT)
        vector = embedder.embed_query(question.text)
        if vector is None:
            continue
        candidates = [
            (memory, data)
            for memory, keys, data in stored[question.conversation]
            if not keys & set(query.tokens)
        ]
        cosines = recall.cosines(vector, [data for _, data in candidates])
        for (memory, _), cosine in zip(candidates, cosines, strict=True):
            if cosine is not None:
                pairs.append(Pair(question.key, cosine, bool(memory.sources & question.evidence)))
    return pairs


def render(unit: str, rows: Sequence[FloorPrecision], total_questions: int) -> str:
    lines = [
        f"**{unit} unit** ({total_questions} questions): pairs of a question and a memory "
        "sharing no word with it, by cosine floor",
        "",
        "| floor | pairs reaching it | holding evidence | precision | questions reached |",
        "|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        share = "–" if row.precision is None else f"{row.precision:.3f}"
        lines.append(
            f"| {row.floor / 1000:.2f} | {row.pairs:,} | {row.evidence:,} | {share} "
            f"| {row.questions:,} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.meaning_floor", description=__doc__)
    parser.add_argument("--locomo", type=Path, default=None, help="LoCoMo-format file")
    parser.add_argument("--unit", choices=locomo.UNITS, action="append", help="default: both")
    parser.add_argument("--embedder", default="wordllama", help="wordllama, minilm or onnx:PATH")
    args = parser.parse_args(argv)
    data = locomo.read_dataset(args.locomo or locomo_dev_split())
    for unit in args.unit or locomo.UNITS:
        benchmark = locomo.build(data, unit)
        rows = precision_by_floor(meaning_only_pairs(benchmark, args.embedder), FLOORS)
        print(render(unit, rows, len(benchmark.questions)) + "\n")


if __name__ == "__main__":
    main()
