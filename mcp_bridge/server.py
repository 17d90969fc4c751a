"""The MCP server Claude talks to: Taproot's tools, one prompt, and the /mcp HTTP app.

`build_endpoint()` makes a fresh server and Streamable HTTP app each time (a session
manager can run only once), so the ASGI factory and tests each get their own.
"""

from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from urllib.parse import urlsplit

from django.conf import settings
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.types import ASGIApp

from mcp_bridge.activity import CallNoting
from mcp_bridge.auth import DjangoTokenVerifier, auth_settings, token_caller, token_user
from mcp_bridge.database import run_sync
from mcp_bridge.exchange import Exchange
from mcp_bridge.replies import UNEXPECTED, logger
from mcp_bridge.request_log import RequestLogMiddleware
from mcp_bridge.tools import DEFINITIONS
from mcp_bridge.tools.reflect import reflect_text
from memories.errors import InvalidInput
from memories.jsonutil import dumps

MCP_PATH = "/mcp"
# Where Claude's connector calls come from, besides the deployment itself.
CLAUDE_ORIGINS = ["https://claude.ai", "https://claude.com"]

INSTRUCTIONS = """\
Taproot is your memory across conversations with this user.

1. At the start of every conversation, before your first reply, call taproot_reflect and \
read what it returns: who you are, who you are talking to, what is in progress, and a \
catalog of older memories.
2. During the conversation, call taproot_remember as soon as something worth keeping \
happens (a fact, a preference, a decision, a correction, progress on a project), with a \
one-line gist written there and then. When the conversation touches a catalog line or \
something you may have stored before, load it with taproot_recall.
3. At the end of the conversation, call taproot_close with a short reflection.

Keep the core tier small with taproot_promote, and archive what is no longer true with \
taproot_forget.
"""

PROMPT_DESCRIPTION = (
    "Your Taproot memory for the start of a conversation: the same payload taproot_reflect "
    "returns (core memories in full, the catalog of other memories, recent closings)."
)


def _version() -> str:
    try:
        return version("taproot")
    except PackageNotFoundError:
        return ""


async def reflect_prompt(ctx: Context) -> str:
    """The reflect payload as a prompt, for clients that offer prompts rather than tools."""

    def payload() -> str:
        # Recorded like the tool: a client fetches the prompt to load the memory with it.
        return reflect_text(owner=token_user())

    try:
        return await run_sync(payload)
    except InvalidInput as refusal:
        return dumps({"status": "error", "message": refusal.message})
    except Exception:
        logger.exception("prompt taproot_reflect failed unexpectedly")
        return dumps({"status": "error", "message": UNEXPECTED.format(tool="taproot_reflect")})


def build_server() -> MCPServer:
    tools = [definition.to_tool() for definition in DEFINITIONS]
    server = MCPServer(
        "taproot",
        title="Taproot",
        instructions=INSTRUCTIONS,
        website_url=settings.TAPROOT_PUBLIC_URL,
        version=_version(),
        token_verifier=DjangoTokenVerifier(),
        auth=auth_settings(),
        tools=tools,
        middleware=[
            RequestLogMiddleware(tool.name for tool in tools),
            CallNoting((tool.name for tool in tools), token_caller),
        ],
    )
    server.prompt(name="taproot_reflect", title="Taproot memory", description=PROMPT_DESCRIPTION)(
        reflect_prompt
    )
    _offer_no_resources(server)
    return server


RESOURCE_METHODS = ("resources/list", "resources/templates/list", "resources/read")


def _offer_no_resources(server: MCPServer) -> None:
    """Taproot has no resources: with their handlers gone, the `resources` capability is
    not advertised and the methods are answered "method not found".

    The SDK registers these handlers on every server and advertises each capability
    whose handler is registered, with no public way to leave one out.
    """
    handlers = server._lowlevel_server._request_handlers
    for method in RESOURCE_METHODS:
        handlers.pop(method, None)


def transport_security() -> TransportSecuritySettings:
    """The SDK's DNS-rebinding guard, allowing the public host and ALLOWED_HOSTS."""
    if "*" in settings.ALLOWED_HOSTS:
        # The operator accepts any Host header; the guard would only contradict that.
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    public = urlsplit(settings.TAPROOT_PUBLIC_URL)
    hosts = [public.netloc]
    for host in settings.ALLOWED_HOSTS:
        # Django's ".example.com" (any subdomain) has no equivalent in the SDK's list.
        if host and not host.startswith("."):
            hosts += [host, f"{host}:*"]
    origins = [f"{public.scheme}://{public.netloc}", *CLAUDE_ORIGINS]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=list(dict.fromkeys(hosts)),
        allowed_origins=list(dict.fromkeys(origins)),
    )


@dataclass
class Endpoint:
    app: ASGIApp
    session_manager: StreamableHTTPSessionManager


def build_endpoint() -> Endpoint:
    """The /mcp Starlette app: stateless, JSON responses, bearer-protected; an ordinary
    request is answered in its own task (mcp_bridge.exchange)."""
    server = build_server()
    app = server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        stateless_http=True,
        json_response=True,
        transport_security=transport_security(),
    )
    Exchange.install(server.session_manager)
    return Endpoint(app=app, session_manager=server.session_manager)
