"""What every dashboard page header and sidebar shows: store counts and the preview."""

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from dashboard.preview import Preview, build_preview
from memories.models import Memory
from memories.services import reflect


@dataclass(frozen=True)
class Overview:
    counts: dict[str, int]  # total, live, archived, core
    preview: Preview


def store_overview(owner: Any, *, now: datetime) -> Overview:
    """Five queries whatever the store holds: the counts, and four for the payload."""
    return Overview(
        counts=Memory.objects.for_owner(owner).state_counts(),
        preview=build_preview(reflect(owner=owner, now=now)),
    )
