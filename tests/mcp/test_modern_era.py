"""What Claude.ai relies on in 2026 (anthropics/claude-ai-mcp): `server/discover` answered
with a token; tool results as text in `content`; and nothing it needs carried only by the
server's instructions, which Claude.ai drops (#93)."""

import json
from typing import Any

import httpx2
import pytest
from mcp.shared.inbound import MCP_METHOD_HEADER, MCP_PROTOCOL_VERSION_HEADER
from mcp.types import (
    CLIENT_CAPABILITIES_META_KEY,
    CLIENT_INFO_META_KEY,
    PROTOCOL_VERSION_META_KEY,
)

from mcp_bridge.server import INSTRUCTIONS
from mcp_bridge.tools import DEFINITIONS
from tests.mcp.client import MODERN_VERSION

pytestmark = [pytest.mark.server, pytest.mark.django_db(transaction=True)]


def discover(mcp_url: str, token: str | None) -> httpx2.Response:
    headers = {
        "Accept": "application/json, text/event-stream",
        MCP_PROTOCOL_VERSION_HEADER: MODERN_VERSION,
        MCP_METHOD_HEADER: "server/discover",
    }
    if token:
        headers["Authorization"] = f"Bearer {token}"
    meta = {
        PROTOCOL_VERSION_META_KEY: MODERN_VERSION,
        CLIENT_INFO_META_KEY: {"name": "claude-ai", "version": "0.1.0"},
        CLIENT_CAPABILITIES_META_KEY: {},
    }
    body = {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": meta}}
    return httpx2.post(mcp_url, json=body, headers=headers, timeout=30)


def test_server_discover_with_a_token_answers_a_result(mcp_url, token_for, user):
    answer = discover(mcp_url, token_for(user))

    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert "error" not in body, body
    result = body["result"]
    assert MODERN_VERSION in result["supportedVersions"]
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "taproot"
    assert "tools" in result["capabilities"]


def test_server_discover_without_a_token_is_the_sign_in_challenge(mcp_url):
    answer = discover(mcp_url, None)
    assert answer.status_code == 401
    assert "resource_metadata=" in answer.headers["www-authenticate"]


def test_every_tool_answers_in_content_text_in_both_eras(eras, make_memory):
    for mcp in eras:
        memory = make_memory(content="The lighthouse on the north shore.", gist="Lighthouse")
        calls: list[tuple[str, dict[str, Any]]] = [
            ("taproot_reflect", {}),
            ("taproot_status", {}),
            ("taproot_recall", {"ids": [str(memory.pk)]}),
            (
                "taproot_remember",
                {"category": "episodic", "content": "Tide at six.", "gist": "Tide"},
            ),
            ("taproot_promote", {"memory_id": str(memory.pk), "salience": "high"}),
            ("taproot_close", {"reflection": "We talked about the tide."}),
            ("taproot_migrate", {}),
            ("taproot_forget", {"action": "archive", "memory_id": str(memory.pk)}),
        ]
        assert {name for name, _ in calls} == {d.name for d in DEFINITIONS}
        for name, arguments in calls:
            result = mcp.call(name, arguments)
            assert not result.is_error, (name, result)
            assert result.structured_content is None, name
            (content,) = result.content
            assert content.type == "text"
            assert json.loads(content.text)["status"] == "ok", (name, content.text)


# What the instructions ask, and where each tool says it itself.
INSTRUCTED = {
    "taproot_reflect": ("start of every conversation", "before you answer"),
    "taproot_remember": ("as soon as", "gist"),
    "taproot_recall": ("when the conversation touches",),
    "taproot_close": ("end of a conversation",),
    "taproot_promote": ("keep the core tier small",),
    "taproot_forget": ("no longer true",),
}


@pytest.mark.parametrize("tool", list(INSTRUCTED))
def test_each_tool_says_itself_what_the_instructions_say_of_it(tool):
    description = next(d.description for d in DEFINITIONS if d.name == tool).lower()
    assert tool in INSTRUCTIONS
    for words in INSTRUCTED[tool]:
        assert words in description, (tool, words)
