"""Each tool's handler by name, for code that calls one without MCP (the bench, the
tests, the admin's imports): a handler takes the token's owner and the tool's arguments
by name, as sent, and answers with the JSON reply the tool's description promises.

The handlers live with their tools, one module each in mcp_bridge.tools.
"""

from mcp_bridge.toolkit import REFLECT_HINTS, reflect_hint, resolve_memory_id
from mcp_bridge.tools.close import close
from mcp_bridge.tools.forget import FORGET_ACTIONS, archive, compress, forget, unarchive
from mcp_bridge.tools.migrate import migrate
from mcp_bridge.tools.promote import promote
from mcp_bridge.tools.recall import recall, recall_filters
from mcp_bridge.tools.reflect import reflect_text
from mcp_bridge.tools.remember import remember, remembered_ahead
from mcp_bridge.tools.status import status

__all__ = [
    "FORGET_ACTIONS",
    "REFLECT_HINTS",
    "archive",
    "close",
    "compress",
    "forget",
    "migrate",
    "promote",
    "recall",
    "recall_filters",
    "reflect_hint",
    "reflect_text",
    "remember",
    "remembered_ahead",
    "resolve_memory_id",
    "status",
    "unarchive",
]
