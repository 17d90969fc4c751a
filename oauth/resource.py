"""The one protected resource this server issues tokens for: `<TAPROOT_PUBLIC_URL>/mcp`.

Every grant and token is bound to exactly that URL (RFC 8707), so /mcp never receives a
token it must refuse. A request without `resource` gets it; any other value is refused
with `invalid_target`. /mcp's token check (mcp_bridge.auth) compares by the same rule.
"""

from collections.abc import Iterable

from django.conf import settings

from memories.quoting import shown

# The one scope (OAUTH2_PROVIDER's SCOPES in settings): what /mcp requires of a token.
MCP_SCOPE = "mcp"


class ForeignResource(ValueError):
    """A `resource` value that is not this server's /mcp URL."""

    def __init__(self, value: str) -> None:
        self.value = value
        super().__init__(
            f"This server only issues tokens for {mcp_resource_url()}; "
            f"the resource {shown(value)} is not served here."
        )


def mcp_resource_url() -> str:
    """This server's /mcp URL, as every grant and token names it."""
    return settings.TAPROOT_MCP_URL


def is_mcp_resource(value: object) -> bool:
    """True for the /mcp URL, compared exactly after dropping trailing slashes."""
    return isinstance(value, str) and value.rstrip("/") == mcp_resource_url().rstrip("/")


def bind_to_mcp(values: Iterable[object]) -> list[str]:
    """The resource list a grant or token gets: always `[<mcp url>]`.

    An empty request means "this server's resource"; anything that is not the /mcp URL
    raises ForeignResource, naming the first offending value.
    """
    for value in values:
        if not is_mcp_resource(value):
            raise ForeignResource(str(value))
    return [mcp_resource_url()]
