"""The MCP server Claude talks to at /mcp: its tools, their replies, and the check of each
request's bearer token (the tokens themselves are the oauth app's)."""
