"""What every dashboard page header and sidebar shows: store counts and the preview."""

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from dashboard.preview import Preview, build_preview
from memories.models import Memory
from memories.services import reflect, reflect_history
from memories.shortids import short_ids


@dataclass(frozen=True)
class Overview:
    counts: dict[str, int]  # total, live, archived, core
    preview: Preview


def store_overview(owner: Any, *, now: datetime) -> Overview:
    """A handful of queries whatever the store holds: the counts, the payload's reads, when
    Claude last loaded it, and the short ids of the lines the budget cut (the payload
    finds only those of what it sends). Building the preview records no reflect."""
    payload = reflect(owner=owner, now=now)
    cut_ids = short_ids(owner, (uuid.UUID(entry.id) for entry in payload.cut))
    return Overview(
        counts=Memory.objects.for_owner(owner).state_counts(),
        preview=build_preview(
            payload,
            reflect_history(owner=owner, now=now),
            now,
            cut_ids={str(pk): shown for pk, shown in cut_ids.items()},
        ),
    )
