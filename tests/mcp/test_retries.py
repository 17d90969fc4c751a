"""Retries store once, over real HTTP with the real MCP client: Claude.ai sends a call
again when it saw it fail, sometimes while the first is still running (issue 31)."""

from typing import Any

import anyio
import pytest
from anyio.from_thread import BlockingPortal

from memories.models import Closing, Memory
from tests.mcp.client import decode, mcp_client

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.server]

REMEMBER = {
    "category": "episodic",
    "content": "Planted the tomatoes along the south fence.",
    "gist": "Tomatoes planted by the south fence",
    "tags": ["garden"],
}


def test_eight_parallel_identical_remembers_store_one(
    portal: BlockingPortal, mcp_url: str, token_for: Any, user: Any
) -> None:
    token = token_for(user)

    async def eight() -> list[Any]:
        results: list[Any] = []
        async with mcp_client(mcp_url, token, mode="legacy") as client:

            async def call() -> None:
                results.append(await client.call_tool("taproot_remember", REMEMBER))

            async with anyio.create_task_group() as group:
                for _ in range(8):
                    group.start_soon(call)
        return results

    replies = [decode(result) for result in portal.call(eight)]
    assert all(reply["status"] == "ok" for reply in replies), replies
    assert len({reply["memory_id"] for reply in replies}) == 1
    assert sum(1 for reply in replies if reply.get("already_stored")) == 7
    assert Memory.objects.filter(owner=user).count() == 1


def test_a_retried_close_keeps_one_closing(eras: Any, user: Any) -> None:
    legacy, modern = eras
    first = legacy.reply("taproot_close", {"reflection": "We planned the garden."})
    again = modern.reply("taproot_close", {"reflection": "We planned the garden."})
    assert again["reflection_id"] == first["reflection_id"]
    assert again["already_stored"] is True
    assert "already_stored" not in first
    assert Closing.objects.filter(owner=user).count() == 1
