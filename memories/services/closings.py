"""Closing a conversation: keep its reflection (SPEC §4)."""

from datetime import datetime

from memories.limits import MAX_REFLECTION, MAX_TITLE, check_optional, check_text
from memories.models import Closing, User
from memories.services._common import now_or


def close(
    *,
    owner: User,
    reflection: str,
    conversation_title: str | None = None,
    conversation_url: str | None = None,
    now: datetime | None = None,
) -> Closing:
    """Keep a closing reflection (permanent). A blank title or URL is none."""
    # Stored trimmed: every reflect shows it, and padding would only cost tokens there.
    text = check_text(reflection.strip(), field="reflection", limit=MAX_REFLECTION)
    title = check_optional(
        None if conversation_title is None else conversation_title.strip(),
        field="conversation_title",
        limit=MAX_TITLE,
    )
    url = check_optional(
        None if conversation_url is None else conversation_url.strip(), field="conversation_url"
    )
    return Closing.objects.create(
        owner=owner,
        reflection=text,
        conversation_title=title,
        conversation_url=url,
        created_at=now_or(now),
    )
