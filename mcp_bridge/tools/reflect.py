"""taproot_reflect: the payload Claude loads at the start of a conversation."""

from mcp.types import ToolAnnotations

from mcp_bridge.auth import token_client
from mcp_bridge.toolkit import ToolDefinition
from memories import services
from memories.models import User


def reflect_text(*, owner: User) -> str:
    """The payload, recorded as loaded by the token's client (status and the dashboard
    preview build it without this)."""
    client_id, client_name = token_client()
    services.record_reflect(owner=owner, client_id=client_id, client_name=client_name)
    return services.reflect(owner=owner).text


TOOL = ToolDefinition(
    name="taproot_reflect",
    position=1,
    title="Load memory",
    description=(
        "Call this first, at the start of every conversation, before you answer: it "
        "loads who you are and who you are talking to. Returns JSON with core_memories "
        "(the always-loaded tier, in full, by category), core_overflow (core memories "
        "that did not fit in full, as lines), catalog (by category, one line per other "
        "memory the budget holds, important then recent ones first, under month "
        "headings: [id] gist, [high] when important), how many memories the "
        "catalog leaves out, and the latest closing reflections; it never exceeds its "
        "token budget. Ids are short: every tool takes them as shown. Load the full text "
        "behind any line with taproot_recall(ids=[...]). Takes no arguments and changes "
        "no memory."
    ),
    annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False),
    handler=reflect_text,
    meta={"anthropic/alwaysLoad": True},
)
