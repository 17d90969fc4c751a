"""What every dashboard page header and sidebar shows: store counts and the preview."""

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from dashboard.preview import Preview, build_preview
from memories.models import Memory
from memories.services import reflect, reflect_history


@dataclass(frozen=True)
class Overview:
    counts: dict[str, int]  # total, live, archived, core
    preview: Preview


def store_overview(owner: Any, *, now: datetime) -> Overview:
    """A handful of queries whatever the store holds: the counts, the payload's reads, and
    when Claude last loaded it. Building the preview records no reflect."""
    return Overview(
        counts=Memory.objects.for_owner(owner).state_counts(),
        preview=build_preview(
            reflect(owner=owner, now=now), reflect_history(owner=owner, now=now), now
        ),
    )
