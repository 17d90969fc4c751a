"""What each tool advertises besides its description, pinned: clients rely on the input
schemas (names, types, enums, bounds, required) and hints exactly as tools/list gives them.

tool_schemas.json is the listing as it stood before the tools were generated from their
parameter models; a change to it must be deliberate. Descriptions are left out (other
tests hold their words). Regenerate after a deliberate change with
`TAPROOT_WRITE_TOOL_SCHEMAS=1 scripts/test tests/mcp/test_tool_schemas.py`.
"""

import json
import os
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.server]

PINNED = Path(__file__).with_name("tool_schemas.json")


def _listed(tool: Any) -> dict[str, Any]:
    listed: dict[str, Any] = tool.model_dump(by_alias=True, exclude_none=True, mode="json")
    listed.pop("description", None)
    return listed


def test_tools_list_advertises_the_pinned_schemas_in_the_pinned_order(eras):
    for mcp in eras:
        listed = [_listed(tool) for tool in mcp.list_tools().tools]
        if os.environ.get("TAPROOT_WRITE_TOOL_SCHEMAS"):
            PINNED.write_text(json.dumps(listed, indent=2) + "\n")
        pinned = json.loads(PINNED.read_text())
        assert [tool["name"] for tool in listed] == [tool["name"] for tool in pinned]
        for got, want in zip(listed, pinned, strict=True):
            # Values exactly, and the order of the properties; other key order is free.
            assert got == want, got["name"]
            properties = got["inputSchema"]["properties"]
            assert list(properties) == list(want["inputSchema"]["properties"]), got["name"]
