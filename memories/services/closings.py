"""taproot_close: keep a closing reflection (SPEC §4)."""

from datetime import datetime
from typing import Any

from memories.models import Closing, User
from memories.services._common import now_or
from memories.validation import MAX_REFLECTION, MAX_TITLE, optional_text, require_text, trimmed

CLOSING_MESSAGE = "Reflection stored. Safe travels."


def close(
    *,
    owner: User,
    reflection: Any,
    conversation_title: Any = None,
    conversation_url: Any = None,
    now: datetime | None = None,
) -> dict[str, Any]:
    # Stored trimmed: every reflect shows it, and padding would only cost tokens there.
    text = require_text(trimmed(reflection), field="reflection", limit=MAX_REFLECTION)
    title = optional_text(conversation_title, field="conversation_title", limit=MAX_TITLE)
    url = optional_text(conversation_url, field="conversation_url")
    closing = Closing.objects.create(
        owner=owner,
        reflection=text,
        conversation_title=title,
        conversation_url=url,
        created_at=now_or(now),
    )
    return {
        "status": "ok",
        "action": "closed",
        "reflection_id": str(closing.pk),
        "message": CLOSING_MESSAGE,
    }
