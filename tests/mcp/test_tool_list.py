"""What a client sees before calling anything: the eight tools, their schemas and hints,
the server instructions and the reflect prompt, in both protocol eras."""

import json

import pytest
from mcp.shared.exceptions import MCPError
from mcp.types import METHOD_NOT_FOUND

from memories.models import ReflectCall
from tests.mcp.client import MODERN_VERSION

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.server]

# In the order tools/list gives them, every time.
TOOL_ORDER = [
    "taproot_reflect",
    "taproot_remember",
    "taproot_recall",
    "taproot_promote",
    "taproot_forget",
    "taproot_close",
    "taproot_migrate",
    "taproot_status",
]
TOOL_NAMES = set(TOOL_ORDER)

# (read_only, destructive, idempotent) as SPEC §4 lists them; None = not stated.
HINTS = {
    "taproot_reflect": (True, None, None),
    "taproot_status": (True, None, None),
    "taproot_recall": (True, False, False),
    "taproot_remember": (False, False, False),
    "taproot_promote": (False, False, True),
    "taproot_forget": (False, True, False),
    "taproot_close": (False, False, False),
    "taproot_migrate": (False, False, True),
}


def test_each_era_negotiates_its_protocol_version(eras):
    legacy, modern = eras
    assert legacy.protocol_version.startswith("2025-")
    # mode="auto" quietly falls back to the handshake if 2026-07-28 fails: check it did not.
    assert modern.protocol_version == MODERN_VERSION


def test_both_eras_list_the_same_eight_tools_with_descriptions(eras):
    listings = [mcp.list_tools().tools for mcp in eras]
    for tools in listings:
        assert {tool.name for tool in tools} == TOOL_NAMES
        for tool in tools:
            assert len(tool.description) > 80, tool.name
            assert tool.title, tool.name
    legacy, modern = ({t.name: t.model_dump() for t in tools} for tools in listings)
    assert legacy == modern
    # When to call the three that frame a conversation, in the words Claude reads.
    descriptions = {name: tool["description"] for name, tool in legacy.items()}
    assert "start of every conversation" in descriptions["taproot_reflect"]
    assert "as soon as" in descriptions["taproot_remember"]
    assert "Write the gist now" in descriptions["taproot_remember"]
    assert (
        "category and content are required only when creating" in (descriptions["taproot_remember"])
    )
    assert "end of a conversation" in descriptions["taproot_close"]


def test_tools_are_listed_in_a_fixed_order(eras):
    for mcp in eras:
        for _ in range(2):
            assert [tool.name for tool in mcp.list_tools().tools] == TOOL_ORDER


def test_recall_is_read_only_and_says_it_records_use(eras):
    for mcp in eras:
        recall = next(tool for tool in mcp.list_tools().tools if tool.name == "taproot_recall")
        assert recall.annotations is not None
        assert recall.annotations.read_only_hint is True
        assert "records that the recalled ones were used" in recall.description
        assert "orders future results" in recall.description


def test_annotations_are_truthful_and_nothing_is_open_world(eras):
    for mcp in eras:
        for tool in mcp.list_tools().tools:
            hints = tool.annotations
            assert hints is not None, tool.name
            assert hints.open_world_hint is False, tool.name
            read_only, destructive, idempotent = HINTS[tool.name]
            assert hints.read_only_hint is read_only, tool.name
            if destructive is not None:
                assert hints.destructive_hint is destructive, tool.name
            if idempotent is not None:
                assert hints.idempotent_hint is idempotent, tool.name


def test_only_reflect_is_always_loaded(eras):
    for mcp in eras:
        metas = {tool.name: tool.meta or {} for tool in mcp.list_tools().tools}
        assert metas["taproot_reflect"] == {"anthropic/alwaysLoad": True}
        others = [meta for name, meta in metas.items() if name != "taproot_reflect"]
        assert all("anthropic/alwaysLoad" not in meta for meta in others)


def test_schemas_advertise_enums_bounds_and_required_arguments(eras):
    for mcp in eras:
        schemas = {tool.name: tool.input_schema for tool in mcp.list_tools().tools}
        remember = schemas["taproot_remember"]
        # Required only when creating: an update sends update_id and what changes.
        assert "required" not in remember
        assert remember["properties"]["category"]["enum"] == [
            "identity",
            "relationship",
            "active_thread",
            "episodic",
            "error",
        ]
        assert remember["properties"]["salience"]["enum"] == ["high", "medium", "low"]
        assert remember["properties"]["content"]["maxLength"] == 20_000
        assert remember["properties"]["gist"]["maxLength"] == 300
        assert remember["properties"]["tags"]["type"] == "array"
        assert remember["properties"]["tags"]["maxItems"] == 50
        assert remember["properties"]["core"]["type"] == "boolean"
        recall = schemas["taproot_recall"]
        assert "required" not in recall
        limit = recall["properties"]["limit"]
        assert (limit["type"], limit["minimum"], limit["maximum"]) == ("integer", 1, 50)
        assert recall["properties"]["ids"]["maxItems"] == 50
        # Ids come as the catalog shows them (short), so none is declared a UUID.
        id_arguments = [
            recall["properties"]["ids"]["items"],
            remember["properties"]["linked_memories"]["items"],
            remember["properties"]["update_id"],
            schemas["taproot_promote"]["properties"]["memory_id"],
            schemas["taproot_forget"]["properties"]["memory_id"],
            schemas["taproot_forget"]["properties"]["ids"]["items"],
        ]
        assert all("format" not in schema for schema in id_arguments)
        forget = schemas["taproot_forget"]
        assert forget["required"] == ["action"]
        actions = forget["properties"]["action"]["enum"]
        assert actions == ["archive", "unarchive", "delete", "compress"]
        assert schemas["taproot_close"]["required"] == ["reflection"]
        assert schemas["taproot_promote"]["required"] == ["memory_id"]
        for name in ("taproot_reflect", "taproot_status", "taproot_migrate"):
            assert schemas[name]["properties"] == {}
        for schema in schemas.values():
            for name, prop in schema["properties"].items():
                assert prop.get("description"), name
                assert prop.get("default", "absent") is not None, name


def test_tools_declare_no_output_schema(eras):
    # Replies are compact JSON text, not structured content the SDK would re-serialise.
    for mcp in eras:
        assert all(tool.output_schema is None for tool in mcp.list_tools().tools)


def test_the_server_asks_claude_to_reflect_first_remember_and_close(eras):
    for mcp in eras:
        instructions = mcp.client.instructions
        assert instructions
        for tool in ("taproot_reflect", "taproot_remember", "taproot_close"):
            assert tool in instructions
        assert instructions.index("taproot_reflect") < instructions.index("taproot_close")


def test_the_reflect_payload_is_also_a_prompt(eras, portal):
    for mcp in eras:
        prompts = portal.call(mcp.client.list_prompts).prompts
        assert [p.name for p in prompts] == ["taproot_reflect"]
        ReflectCall.objects.all().delete()
        prompt = portal.call(mcp.client.get_prompt, "taproot_reflect")
        # Getting the prompt loads the memory as the tool does: it is recorded.
        assert ReflectCall.objects.count() == 1
        text = prompt.messages[0].content.text
        assert json.loads(text) == mcp.reply("taproot_reflect")


def test_the_server_advertises_only_what_it_offers(eras, portal):
    """Tools and the reflect prompt; no resources, since it has none to list or read."""
    for mcp in eras:
        capabilities = mcp.client.server_capabilities
        assert capabilities.tools is not None, mcp.mode
        assert capabilities.prompts is not None, mcp.mode
        assert capabilities.resources is None, mcp.mode
        with pytest.raises(MCPError) as refused:
            portal.call(mcp.client.list_resources)
        assert refused.value.error.code == METHOD_NOT_FOUND, mcp.mode
