"""taproot_close: the closing reflection of a conversation."""

from datetime import datetime
from typing import Annotated

from mcp_bridge import arguments as arg
from mcp_bridge import coercion as read
from mcp_bridge.toolkit import Reply, ToolDefinition, ToolParams, hints, reading, speaking
from memories import services
from memories.limits import MAX_REFLECTION, MAX_TITLE
from memories.models import User

CLOSING_MESSAGE = "Reflection stored. Safe travels."


def _reflection(value: object) -> str:
    return read.require_text(read.trimmed(value), field="reflection", limit=MAX_REFLECTION)


def _title(value: object) -> str | None:
    return read.optional_text(value, field="conversation_title", limit=MAX_TITLE)


def _url(value: object) -> str | None:
    return read.optional_text(value, field="conversation_url")


class CloseParams(ToolParams):
    required = ("reflection",)

    reflection: Annotated[
        str,
        arg.text(
            "What happened in this conversation, what matters for next time, what is left open.",
            max_length=MAX_REFLECTION,
        ),
        reading(_reflection),
    ]
    conversation_title: Annotated[
        str | None,
        arg.text("A short title for the conversation.", max_length=MAX_TITLE),
        reading(_title),
    ]
    conversation_url: Annotated[
        str | None, arg.text("The URL of the conversation, if known."), reading(_url)
    ]


@speaking()
def close(*, owner: User, now: datetime | None = None, **sent: object) -> Reply:
    given = CloseParams.read(sent)
    closed = services.close(
        owner=owner,
        reflection=given.reflection,
        conversation_title=given.conversation_title,
        conversation_url=given.conversation_url,
        now=now,
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
