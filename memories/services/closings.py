"""Closing a conversation: keep its reflection (SPEC §4)."""

from dataclasses import dataclass
from datetime import datetime

from django.db import transaction

from memories.limits import MAX_REFLECTION, MAX_TITLE, check_optional, check_text
from memories.models import Closing, User
from memories.services import retries
from memories.services._common import now_or


@dataclass(frozen=True)
class Closed:
    """The closing kept; `already_stored`: a retry, and `closing` is the one kept first."""

    closing: Closing
    already_stored: bool = False


def close(
    *,
    owner: User,
    reflection: str,
    conversation_title: str | None = None,
    conversation_url: str | None = None,
    now: datetime | None = None,
) -> Closed:
    """Keep a closing reflection (permanent). A blank title or URL is none. The same
    reflection again within the retry window is a retry: nothing new is kept."""
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
    now = now_or(now)
    fields = {"reflection": text, "conversation_title": title, "conversation_url": url}
    with transaction.atomic(durable=True):
        retries.hold(owner, "close", fields)
        since = retries.since(now)
        if since is not None:
            twin = (
                Closing.objects.filter(owner=owner, created_at__gte=since, **fields)
                .order_by("-created_at")
                .first()
            )
            if twin is not None:
                return Closed(twin, already_stored=True)
        return Closed(Closing.objects.create(owner=owner, created_at=now, **fields))
