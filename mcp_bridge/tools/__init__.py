"""Taproot's tools (SPEC §4), one module each: its parameter model, its handler and its
definition (mcp_bridge.toolkit). A module here with a `TOOL` is a tool; tools/list gives
them in the order of their `position`.
"""

import importlib
import pkgutil

from mcp_bridge.toolkit import ToolDefinition


def _discovered() -> list[ToolDefinition]:
    found = []
    for module in pkgutil.iter_modules(__path__):
        tool = getattr(importlib.import_module(f"{__name__}.{module.name}"), "TOOL", None)
        if isinstance(tool, ToolDefinition):
            found.append(tool)
    found.sort(key=lambda tool: tool.position)
    positions = [tool.position for tool in found]
    assert len(set(positions)) == len(positions), f"two tools share a position: {positions}"
    return found


DEFINITIONS: list[ToolDefinition] = _discovered()
