"""Recall through the write-time index gives exactly what SPEC §3 computes from scratch.

The reference below tokenises every field of every memory at query time, the slow way the
index exists to avoid, and applies the formula, the relevance rule and the tie order as
the spec words them. Random stores and queries must rank identically on every backend.
"""

import math
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from fractions import Fraction

import pytest
from django.db import transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mcp_bridge.handlers import recall
from memories.models import Memory
from memories.recall.tokens import tokenize
from tests.conftest import NOW

# Written for the seed relevance profile (SPEC §3); the taproot profile has its own.
pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("seed_profile")]

LATER = NOW + timedelta(hours=3)
SALIENCE = {"high": 1.0, "medium": 0.6, "low": 0.3}
# Words whose stems meet (runs/running, cats/cat, classes/class) and some that only look
# alike, so keyword, content-only and missing tokens all occur.
WORDS = [
    "garden",
    "gardens",
    "running",
    "runn",
    "cats",
    "cat",
    "classes",
    "class",
    "glass",
    "walked",
    "walk",
    "tea",
    "James's",
    "42",
    "lisbon",
]
texts = st.lists(st.sampled_from(WORDS), min_size=0, max_size=4).map(lambda words: ", ".join(words))
word_lists = st.lists(st.sampled_from(WORDS), max_size=2, unique=True)


@dataclass
class Spec:
    gist: str
    content: str
    tags: list[str]
    keywords: list[str]
    salience: str
    retrieval_count: int
    days_since_retrieval: int
    updated_days_ago: int


specs = st.builds(
    Spec,
    gist=texts,
    content=texts.map(lambda t: t or "plain"),
    tags=word_lists,
    keywords=word_lists,
    salience=st.sampled_from(list(SALIENCE)),
    retrieval_count=st.sampled_from([0, 0, 1, 3]),
    days_since_retrieval=st.sampled_from([0, 8]),
    updated_days_ago=st.sampled_from([0, 0, 1]),
)


def reference_ranking(memories: list[Memory], query: str, now: datetime) -> list[tuple[str, float]]:
    q = set(tokenize(query))
    scored = []
    for m in memories:
        keyword_tokens = set(tokenize(m.gist))
        for text in [*m.tags, *m.search_keywords]:
            keyword_tokens |= set(tokenize(text))
        content_tokens = set(tokenize(m.content))
        relevance = Fraction(0)
        if q:
            k = len(q & keyword_tokens)
            c = len((q & content_tokens) - keyword_tokens)
            if k + c == 0:
                continue
            relevance = (k + Fraction(35, 100) * c) / len(q)
        if m.retrieval_count == 0:
            base = 0.6
        else:
            since = m.last_retrieved or m.created_at
            days = max((now - since).total_seconds() / 86_400, 0.0)
            base = math.log(m.retrieval_count + 1) * (days + 1) ** -0.5
        score = base + SALIENCE[m.salience] + 2.5 * float(relevance)
        scored.append((m, score))
    # Exactly equal scores: newer updated_at, then id as its lowercase string.
    scored.sort(key=lambda pair: str(pair[0].id))
    scored.sort(key=lambda pair: pair[0].updated_at, reverse=True)
    scored.sort(key=lambda pair: round(pair[1], 9), reverse=True)
    return [(str(m.id), round(score, 3)) for m, score in scored]


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(store=st.lists(specs, min_size=1, max_size=10), query=texts)
def test_indexed_recall_ranks_exactly_as_the_spec_computes(user, make_memory, store, query):
    with transaction.atomic():
        memories = [
            make_memory(
                id=uuid.UUID(int=(i * 2654435761) % 2**122 | (4 << 76) | (2 << 62)),
                gist=spec.gist,
                content=spec.content,
                tags=spec.tags,
                search_keywords=spec.keywords,
                salience=spec.salience,
                retrieval_count=spec.retrieval_count,
                last_retrieved=(
                    LATER - timedelta(days=spec.days_since_retrieval)
                    if spec.retrieval_count
                    else None
                ),
                updated_at=NOW - timedelta(days=spec.updated_days_ago),
                created_at=NOW - timedelta(days=30),
            )
            for i, spec in enumerate(store)
        ]
        expected = reference_ranking(memories, query, LATER)
        reply = recall(owner=user, query=query, limit=50, now=LATER)
        transaction.set_rollback(True)
    assert [(r["id"], r["activation_score"]) for r in reply["results"]] == expected
