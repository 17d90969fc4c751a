"""A deterministic synthetic memory store: one user with N memories, a few neighbours.

Pure Python, no Django: the same seed, size and `now` always give the same store, on any
machine and under any PYTHONHASHSEED (nothing iterates a set of strings). Words are
made-up pronounceable tokens drawn from a Zipf-distributed vocabulary, so a few words are
everywhere and most are rare, as in real text; each memory also leans on one topic, whose
words recur across the memories about it.
"""

import hashlib
import itertools
import json
import random
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from memories.recall import STOP_WORDS, snowball_stem, stem

VOCABULARY_SIZE = 20_000
TAG_VOCABULARY_SIZE = 400
TOPICS = 300
WORDS_PER_TOPIC = 25
ZIPF_EXPONENT = 1.0
HISTORY_DAYS = 730

# The user's mix. Weights, not exact shares.
CATEGORY_WEIGHTS = {
    "episodic": 48,
    "active_thread": 15,
    "error": 12,
    "relationship": 15,
    "identity": 10,
}
SALIENCE_WEIGHTS = {"high": 15, "medium": 60, "low": 25}
EPISTEMIC_WEIGHTS = {
    "unvalidated": 50,
    "observed": 30,
    "inferred": 15,
    "replicated": 4,
    "contested": 1,
}
CORE_SHARE = 0.02
# Tier-1 memories are mostly about who is who, and shorter than the average memory.
CORE_CATEGORY_WEIGHTS = {"identity": 45, "relationship": 35, "error": 10, "active_thread": 10}

_ONSETS = (
    "b", "c", "d", "f", "g", "h", "j", "k", "l", "m", "n", "p", "r", "s", "t", "v", "w",
    "z", "br", "ch", "cl", "dr", "gr", "pl", "sh", "st", "th", "tr",
)  # fmt: skip
_VOWELS = ("a", "e", "i", "o", "u", "a", "e", "i", "o", "ai", "ou")
_CODAS = ("", "", "", "", "n", "r", "l", "m", "k", "t")


@dataclass(frozen=True)
class SyntheticMemory:
    """One memory as the generator decided it, before any database sees it."""

    id: uuid.UUID
    owner: str
    category: str
    content: str
    gist: str
    salience: str
    core: bool
    tags: tuple[str, ...]
    search_keywords: tuple[str, ...]
    linked_memories: tuple[uuid.UUID, ...]
    epistemic_status: str
    conversation_id: str | None
    created_at: datetime
    updated_at: datetime
    # Every recall of this memory, oldest first (retrieval_count = len, last = newest).
    recalls: tuple[datetime, ...] = ()

    @property
    def retrieval_count(self) -> int:
        return len(self.recalls)

    @property
    def last_retrieved(self) -> datetime | None:
        return self.recalls[-1] if self.recalls else None

    def as_json(self) -> dict[str, object]:
        return {
            "id": str(self.id),
            "owner": self.owner,
            "category": self.category,
            "content": self.content,
            "gist": self.gist,
            "salience": self.salience,
            "core": self.core,
            "tags": list(self.tags),
            "search_keywords": list(self.search_keywords),
            "linked_memories": [str(i) for i in self.linked_memories],
            "epistemic_status": self.epistemic_status,
            "conversation_id": self.conversation_id,
            "created_at": self.created_at.isoformat(),
            "updated_at": self.updated_at.isoformat(),
            "recalls": [t.isoformat() for t in self.recalls],
        }


@dataclass(frozen=True)
class SyntheticStore:
    seed: int
    size: int
    now: datetime
    owner: str
    others: tuple[str, ...]
    memories: tuple[SyntheticMemory, ...] = field(repr=False)

    def of(self, owner: str) -> list[SyntheticMemory]:
        return [m for m in self.memories if m.owner == owner]

    def fingerprint(self) -> str:
        """A digest of every generated value: equal digests mean equal stores."""
        digest = hashlib.sha256()
        for memory in self.memories:
            digest.update(json.dumps(memory.as_json(), sort_keys=True).encode())
        return digest.hexdigest()


class _Zipf:
    """Draws from a list with weight 1 / rank^s (rank from 1)."""

    def __init__(self, items: Sequence[str], exponent: float) -> None:
        self.items = list(items)
        weights = [1.0 / (rank**exponent) for rank in range(1, len(items) + 1)]
        self.cum_weights = list(itertools.accumulate(weights))

    def draw(self, rng: random.Random, k: int) -> list[str]:
        return rng.choices(self.items, cum_weights=self.cum_weights, k=k)


def keeps_whole(word: str) -> bool:
    """Whether both relevance profiles index the word as it is: so a store and its query
    bands are the same whichever profile is measured."""
    return stem(word) == word and snowball_stem(word) == word and word not in STOP_WORDS


def make_words(count: int, rng: random.Random, *, taken: set[str] | None = None) -> list[str]:
    """Distinct made-up words that every recall tokenizer keeps whole."""
    taken = set() if taken is None else taken
    words: list[str] = []
    while len(words) < count:
        syllables = rng.choice((1, 2, 2, 2, 3))
        word = "".join(
            rng.choice(_ONSETS) + rng.choice(_VOWELS) + rng.choice(_CODAS) for _ in range(syllables)
        )
        if not 4 <= len(word) <= 12 or word in taken or not keeps_whole(word):
            continue
        taken.add(word)
        words.append(word)
    return words


@dataclass(frozen=True)
class Vocabulary:
    words: list[str]  # by rank: words[0] is the most frequent
    tags: list[str]
    topics: list[list[str]]
    word_draw: _Zipf
    tag_draw: _Zipf


def make_vocabulary(seed: int) -> Vocabulary:
    rng = random.Random(f"taproot-bench-vocabulary-{seed}")
    taken: set[str] = set()
    words = make_words(VOCABULARY_SIZE, rng, taken=taken)
    tags = make_words(TAG_VOCABULARY_SIZE, rng, taken=taken)
    # Topic words come from the middle of the frequency range: specific, not stop-word-like.
    middle = words[200:12_000]
    topics = [rng.sample(middle, WORDS_PER_TOPIC) for _ in range(TOPICS)]
    return Vocabulary(
        words=words,
        tags=tags,
        topics=topics,
        word_draw=_Zipf(words, ZIPF_EXPONENT),
        tag_draw=_Zipf(tags, 1.1),
    )


def _weighted(rng: random.Random, weights: dict[str, int]) -> str:
    return rng.choices(list(weights), weights=list(weights.values()))[0]


def _sentences(words: list[str], rng: random.Random) -> str:
    parts: list[str] = []
    start = 0
    while start < len(words):
        length = rng.randint(7, 18)
        chunk = words[start : start + length]
        start += length
        text = " ".join(chunk)
        parts.append(text[0].upper() + text[1:] + rng.choice((".", ".", ".", "!", "?")))
    return " ".join(parts)


def _text_words(vocab: Vocabulary, topic: list[str], count: int, rng: random.Random) -> list[str]:
    general = vocab.word_draw.draw(rng, count)
    return [rng.choice(topic) if rng.random() < 0.25 else word for word in general]


def _seconds(moment: datetime) -> datetime:
    return moment.replace(microsecond=0)


class _Generator:
    def __init__(self, seed: int, now: datetime) -> None:
        self.vocab = make_vocabulary(seed)
        self.now = _seconds(now)

    def memory(
        self, rng: random.Random, owner: str, earlier: list[SyntheticMemory]
    ) -> SyntheticMemory:
        vocab = self.vocab
        core = rng.random() < CORE_SHARE
        if core:
            category = _weighted(rng, CORE_CATEGORY_WEIGHTS)
            n_words = int(rng.triangular(50, 160, 70))
        else:
            category = _weighted(rng, CATEGORY_WEIGHTS)
            n_words = int(rng.triangular(50, 400, 110))
        topic = vocab.topics[rng.randrange(TOPICS)]
        content_words = _text_words(vocab, topic, n_words, rng)
        content = _sentences(content_words, rng)
        # A gist sums the memory up: mostly its own topical words, about 15 of them.
        gist_words = [
            rng.choice(topic) if rng.random() < 0.5 else rng.choice(content_words)
            for _ in range(rng.randint(12, 18))
        ]
        gist = " ".join(gist_words)
        gist = gist[0].upper() + gist[1:]
        tags = tuple(dict.fromkeys(vocab.tag_draw.draw(rng, rng.choice((0, 1, 1, 2, 2, 3, 5)))))
        keywords = tuple(
            dict.fromkeys(
                [rng.choice(topic) for _ in range(rng.randint(0, 3))]
                + vocab.word_draw.draw(rng, rng.randint(0, 3))
            )
        )
        # Ages over two years, denser in the recent past (the store grows over time).
        age = timedelta(seconds=int(HISTORY_DAYS * 86_400 * rng.random() ** 1.4))
        created_at = self.now - age
        updated_at = created_at
        if rng.random() < 0.3:
            updated_at = created_at + timedelta(seconds=int(age.total_seconds() * rng.random()))
        # Interest fades: most recalls come soon after a memory is written.
        recalls: list[datetime] = []
        if rng.random() < 0.55:
            count = min(60, int(rng.paretovariate(1.3)))
            span = (self.now - created_at).total_seconds()
            recalls = sorted(
                created_at + timedelta(seconds=int(span * rng.random() ** 3)) for _ in range(count)
            )
        links: tuple[uuid.UUID, ...] = ()
        if earlier and rng.random() < 0.1:
            links = tuple(dict.fromkeys(rng.choice(earlier).id for _ in range(rng.randint(1, 3))))
        return SyntheticMemory(
            id=uuid.UUID(int=rng.getrandbits(128), version=4),
            owner=owner,
            category=category,
            content=content,
            gist=gist,
            salience=_weighted(rng, SALIENCE_WEIGHTS),
            core=core,
            tags=tags,
            search_keywords=keywords,
            linked_memories=links,
            epistemic_status=_weighted(rng, EPISTEMIC_WEIGHTS),
            conversation_id=f"conv-{rng.randrange(10**6):06d}" if rng.random() < 0.3 else None,
            created_at=created_at,
            updated_at=updated_at,
            recalls=tuple(recalls),
        )

    def memories(self, rng: random.Random, owner: str, count: int) -> list[SyntheticMemory]:
        made: list[SyntheticMemory] = []
        for _ in range(count):
            made.append(self.memory(rng, owner, made))
        # Links point only to memories that existed first, as a real store would have them.
        made.sort(key=lambda m: (m.created_at, m.id))
        known: set[uuid.UUID] = set()
        ordered: list[SyntheticMemory] = []
        for memory in made:
            kept = tuple(i for i in memory.linked_memories if i in known)
            if kept != memory.linked_memories:
                memory = _replace_links(memory, kept)
            known.add(memory.id)
            ordered.append(memory)
        return ordered


def _replace_links(memory: SyntheticMemory, links: tuple[uuid.UUID, ...]) -> SyntheticMemory:
    values = dict(memory.__dict__)
    values["linked_memories"] = links
    return SyntheticMemory(**values)


OWNER = "bench-user"


def generate_store(
    *, size: int, now: datetime, seed: int = 7, other_users: int = 3
) -> SyntheticStore:
    """The user's `size` memories, plus `other_users` neighbours with 5% as many each."""
    generator = _Generator(seed, now)
    rng = random.Random(f"taproot-bench-store-{seed}-{size}")
    memories = generator.memories(rng, OWNER, size)
    others = tuple(f"bench-neighbour-{i}" for i in range(1, other_users + 1))
    for name in others:
        memories.extend(generator.memories(rng, name, max(10, size // 20)))
    return SyntheticStore(
        seed=seed,
        size=size,
        now=generator.now,
        owner=OWNER,
        others=others,
        memories=tuple(memories),
    )


def fresh_memories(
    *, seed: int, now: datetime, count: int, stream: str
) -> Iterator[SyntheticMemory]:
    """More memories in the store's style, for the create/update operations being timed."""
    generator = _Generator(seed, now)
    rng = random.Random(f"taproot-bench-fresh-{seed}-{stream}")
    for _ in range(count):
        yield generator.memory(rng, OWNER, [])
