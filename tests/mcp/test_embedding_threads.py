"""Embedding off the database threads (issue 22): a new memory's text and a recall's
query are embedded on mcp_bridge.embedding's threads, and what an embedder reads is
bounded whatever the text."""

import threading
from typing import Any

import anyio
import numpy as np
import pytest

from memories.conf import embedder
from memories.models import Memory, MemoryVector
from memories.recall.embedding import from_bytes
from memories.recall.semantic import EMBEDDED_CHARS, memory_text, query_text
from taproot_site.asgi import build_application
from tests.mcp.test_endpoint import NEW_MEMORY, lifespan, post_in_process, tool_call
from tests.mcp.tokens import make_access_token

EMOJI = "".join(chr(0x1F300 + k % 700) for k in range(20_000))


@pytest.fixture
def embedding_threads(monkeypatch) -> list[tuple[str, str]]:
    """(what, thread name) of every call into the embedder."""
    semantic = embedder()
    assert semantic is not None, "these tests need the default embedder"
    seen: list[tuple[str, str]] = []
    inside = threading.local()
    cls = type(semantic)
    embed, embed_query = cls.embed, cls.embed_query

    def noted_embed(self: Any, texts: Any) -> Any:
        if not getattr(inside, "query", False):  # some models embed queries with embed()
            seen.append(("memory", threading.current_thread().name))
        return embed(self, texts)

    def noted_query(self: Any, text: str) -> Any:
        seen.append(("query", threading.current_thread().name))
        inside.query = True
        try:
            return embed_query(self, text)
        finally:
            inside.query = False

    monkeypatch.setattr(cls, "embed", noted_embed)
    monkeypatch.setattr(cls, "embed_query", noted_query)
    return seen


def _post(token: str, *bodies: dict[str, Any]) -> list[dict[str, Any]]:
    async def requests() -> list[dict[str, Any]]:
        app = build_application()
        async with lifespan(app):
            responses = await post_in_process(app, list(bodies), token)
        return [response.json() for response in responses]

    return anyio.run(requests)


@pytest.mark.django_db(transaction=True)
def test_a_new_memory_and_a_query_are_embedded_on_their_own_threads(
    settings, user, embedding_threads
):
    token = make_access_token(user, resource=settings.TAPROOT_MCP_URL)

    replies = _post(
        token,
        tool_call("taproot_remember", NEW_MEMORY),
        tool_call("taproot_recall", {"query": "Lisbon trip"}),
    )

    assert [reply["result"]["isError"] for reply in replies] == [False, False]
    assert [what for what, _ in embedding_threads] == ["memory", "query"]
    assert embedding_threads[0][1].startswith("taproot-embed-memory")
    assert embedding_threads[1][1].startswith("taproot-embed-query")
    assert "Lisbon" in replies[1]["result"]["content"][0]["text"]
    assert MemoryVector.objects.filter(owner=user).count() == 1


@pytest.mark.django_db(transaction=True)
def test_an_update_embeds_on_the_database_thread_as_before(settings, user, embedding_threads):
    """Its text depends on the stored memory, so the service embeds it itself (bounded by
    EMBEDDED_CHARS like every other)."""
    token = make_access_token(user, resource=settings.TAPROOT_MCP_URL)
    _post(token, tool_call("taproot_remember", NEW_MEMORY))
    memory = Memory.objects.get(owner=user)
    embedding_threads.clear()

    (updated,) = _post(
        token,
        tool_call("taproot_remember", {"update_id": str(memory.pk), "content": "Porto, too."}),
    )

    assert updated["result"]["isError"] is False
    assert [what for what, _ in embedding_threads] == ["memory"]
    assert embedding_threads[0][1].startswith("taproot-db")


def test_what_an_embedder_reads_is_bounded():
    text = memory_text(gist="A gist", content=EMOJI, tags=["tag"], keywords=["word"])

    assert len(text) == EMBEDDED_CHARS
    assert text.startswith("A gist word tag ")
    assert query_text(EMOJI) == EMOJI[:EMBEDDED_CHARS]
    assert query_text("short") == "short"


@pytest.mark.django_db(transaction=True)
def test_a_memory_of_20000_emoji_is_embedded_from_its_first_characters(
    settings, user, embedding_threads
):
    token = make_access_token(user, resource=settings.TAPROOT_MCP_URL)

    (reply,) = _post(
        token,
        tool_call("taproot_remember", {**NEW_MEMORY, "content": EMOJI, "gist": "Emoji"}),
    )

    assert reply["result"]["isError"] is False
    semantic = embedder()
    assert semantic is not None
    (expected,) = semantic.embed(["Emoji " + EMOJI[: EMBEDDED_CHARS - len("Emoji ")]])
    stored = from_bytes(MemoryVector.objects.get(owner=user).vector)
    assert expected is not None
    np.testing.assert_allclose(stored, expected, atol=1e-3)


@pytest.mark.django_db(transaction=True)
def test_minilm_embeds_on_those_threads_too(minilm, settings, user, embedding_threads):
    token = make_access_token(user, resource=settings.TAPROOT_MCP_URL)

    replies = _post(
        token,
        tool_call("taproot_remember", NEW_MEMORY),
        tool_call("taproot_recall", {"query": "a holiday in Portugal"}),
    )

    assert [reply["result"]["isError"] for reply in replies] == [False, False]
    assert [what for what, _ in embedding_threads] == ["memory", "query"]
    assert embedding_threads[0][1].startswith("taproot-embed-memory")
    assert embedding_threads[1][1].startswith("taproot-embed-query")
    assert MemoryVector.objects.get(owner=user).embedder == "minilm-l6-v2-int8"
