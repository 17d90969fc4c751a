"""taproot_close: the closing reflection of a conversation."""

from datetime import datetime
from typing import Annotated

from mcp_bridge import arguments as arg
from mcp_bridge import coercion as read
from mcp_bridge.toolkit import Reply, ToolDefinition, ToolParams, hints, speaking
from memories import services
from memories.limits import MAX_REFLECTION, MAX_TITLE
from memories.models import User

CLOSING_MESSAGE = "Reflection stored. Safe travels."


class CloseParams(ToolParams):
    required = ("reflection",)

    reflection: Annotated[
        arg.Text,
        arg.text(
            "What happened in this conversation, what matters for next time, what is left open.",
            max_length=MAX_REFLECTION,
        ),
    ] = None
    conversation_title: Annotated[
        arg.Text, arg.text("A short title for the conversation.", max_length=MAX_TITLE)
    ] = None
    conversation_url: Annotated[arg.Text, arg.text("The URL of the conversation, if known.")] = None


@speaking()
def close(*, owner: User, now: datetime | None = None, **sent: object) -> Reply:
    given = CloseParams.read(sent)
    text = read.require_text(
        read.trimmed(given.reflection), field="reflection", limit=MAX_REFLECTION
    )
    title = read.optional_text(
        given.conversation_title, field="conversation_title", limit=MAX_TITLE
    )
    url = read.optional_text(given.conversation_url, field="conversation_url")
    closed = services.close(
        owner=owner, reflection=text, conversation_title=title, conversation_url=url, now=now
    )
    reply: Reply = {
        "status": "ok",
        "action": "closed",
        "reflection_id": str(closed.closing.pk),
        "message": CLOSING_MESSAGE,
    }
    if closed.already_stored:
        reply["already_stored"] = True
    return reply


TOOL = ToolDefinition(
    name="taproot_close",
    position=6,
    title="Close the conversation",
    description=(
        "At the end of a conversation, or when the user says goodbye, store a short "
        "closing reflection: what happened, what matters next time, what is left open. "
        "The newest closings are shown by taproot_reflect at the start of the next "
        'conversation. Returns {status, action: "closed", reflection_id, message}.'
    ),
    annotations=hints(read_only=False),
    handler=close,
    params=CloseParams,
)
