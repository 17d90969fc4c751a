from django.apps import AppConfig


class MCPBridgeConfig(AppConfig):
    """The MCP server Claude talks to and its bearer-token check. No models of its own."""

    name = "mcp_bridge"
    verbose_name = "MCP bridge"
