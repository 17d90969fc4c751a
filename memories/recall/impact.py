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
"""

from collections.abc import Mapping
from dataclasses import dataclass

# Margin on each bound, far above the rounding of the few float operations that make a
# score (about 1e-15 on scores below 100) and the same as the band's (scoring.EPSILON).
MARGIN = 1e-9


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
