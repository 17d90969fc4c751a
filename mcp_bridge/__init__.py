"""The MCP server Claude talks to at /mcp: its tools, their replies, the admission of each
request (mcp_bridge.admission: token slots, the body deadline, the refusals) and the check
of its bearer token (the tokens themselves are the oauth app's)."""
