"""Tests of the mcp_bridge app: the tools over real HTTP with the real MCP client,
the token check, the server's connections and workers."""
