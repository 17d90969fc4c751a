"""The MCP server Claude talks to at /mcp: its tools, their replies, the admission of each
request (mcp_bridge.admission: the body deadline and byte budget, each user's places and
queue, the refusals) and the check of its bearer token (the tokens themselves are the
oauth app's)."""
