"""How recall turns text into tokens, under each relevance profile (SPEC §3.1): the seed's
lowercased [a-z0-9'] runs with its small suffix stemmer, and taproot's Unicode words
without English stop words, ASCII ones Snowball-stemmed. Pure: no ORM, no settings.

memories.recall.ranking names a profile's tokenizer; the index (memories.recall.indexing)
and a query both come through it, so a memory and a query are always cut alike.
"""

import re
import threading
import unicodedata
from functools import lru_cache

import snowballstemmer

# --- tokens of the seed profile --------------------------------------------------------

SEED_TOKEN_RE = re.compile(r"[a-z0-9']+")


def stem(token: str) -> str:
    """The seed's small suffix stemmer: the first rule that applies wins."""
    n = len(token)
    if n > 6 and token.endswith("ing"):
        return token[:-3]
    if n > 5 and token.endswith("ed"):
        return token[:-2]
    if n > 5 and token.endswith("es"):
        return token[:-2]
    if n > 4 and token.endswith("s") and not token.endswith("ss"):
        return token[:-1]
    return token


def tokenize(text: str | None) -> list[str]:
    """The seed's tokens: lowercased runs of [a-z0-9'], each stemmed; anything else
    separates tokens. No stop words."""
    if not text:
        return []
    return [stem(raw) for raw in SEED_TOKEN_RE.findall(text.lower())]


# --- tokens of the taproot profile -----------------------------------------------------

# Runs of Unicode letters and digits: \w without the underscore.
WORD_RE = re.compile(r"[^\W_]+")

# English function words: articles, pronouns, auxiliaries, question words, common
# prepositions and conjunctions, and the pieces an apostrophe leaves ("don't" → don, t).
# They tell no memory apart, so a query ignores them.
_STOP_WORD_TEXT = """
    a about all also am an and any are as at be been being both but by can could d did do
    does doing done down each for from had has have he her here hers him his how i if in
    into is it its just ll m may me might mine more most must my no nor not of off on onto
    or other our ours out over own re s same shall she should so some such t than that the
    their theirs them then there these they this those to too under up us ve very was we
    were what when where which who whom whose why will with would you your yours
"""
STOP_WORDS = frozenset(_STOP_WORD_TEXT.split())

# Snowball stemmers keep state while they work: one per thread.
_stemmers = threading.local()


@lru_cache(maxsize=200_000)
def snowball_stem(word: str) -> str:
    """The Snowball English stem of an ASCII word."""
    stemmer = getattr(_stemmers, "english", None)
    if stemmer is None:
        stemmer = _stemmers.english = snowballstemmer.stemmer("english")
    stemmed: str = stemmer.stemWord(word)
    return stemmed


def words(text: str | None) -> list[str]:
    """The taproot profile's words before stop words and stemming: runs of Unicode letters
    and digits of the NFKC-normalised, case-folded text (an apostrophe separates)."""
    if not text:
        return []
    return WORD_RE.findall(unicodedata.normalize("NFKC", text).casefold())


def taproot_tokenize(text: str | None) -> list[str]:
    """The taproot profile's tokens: words without stop words, ASCII ones stemmed."""
    return [
        snowball_stem(word) if word.isascii() else word
        for word in words(text)
        if word not in STOP_WORDS
    ]
