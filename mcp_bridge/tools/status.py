"""taproot_status: how the memory store looks."""

from datetime import datetime

from mcp.types import ToolAnnotations

from mcp_bridge.toolkit import Reply, ToolDefinition
from memories import services
from memories.models import User
from memories.timeutil import isoformat


def status(*, owner: User, now: datetime | None = None) -> Reply:
    found = services.status(owner=owner, now=now)
    payload = found.payload
    omitted = found.catalog_omitted
    return {
        "status": "ok",
        "live_memories": found.live,
        "live_by_category": found.live_by_category,
        "archived": found.archived,
        "closings": found.closings,
        "core_count": payload.payload["core_count"],
        "catalog": {
            "included": payload.payload["catalog_count"],
            "omitted": omitted,
            "omitted_by_window": omitted - payload.cut_count,
            "cut_by_budget": payload.cut_count,
            "window_days": found.window_days,
        },
        "reflect_payload": {
            "bytes": payload.bytes,
            "kb": payload.kilobytes,
            "tokens": payload.tokens,
            "max_tokens": payload.max_tokens,
            "core_tokens": payload.core_tokens,
            "core_share_of_budget": round(payload.core_tokens / payload.max_tokens, 3),
            "core_in_full": len(payload.core_full),
            "core_as_lines": len(payload.core_lines),
            "core_omitted": payload.core_omitted,
        },
        "last_reflect_at": isoformat(found.history.last_at),
        "reflects_last_7_days": found.history.last_7_days,
        "suggestions": [group.as_status() for group in found.suggestions],
        "recall_by_meaning": found.meaning_model or "off: recall ranks by words alone",
        "warnings": payload.warnings,
    }


TOOL = ToolDefinition(
    name="taproot_status",
    position=8,
    title="Store status",
    description=(
        "How the memory store looks: live memories by category, archived and closing "
        "counts, the size of the core tier, catalog lines shown and left out, the size "
        "of the taproot_reflect payload against its token budget, when taproot_reflect "
        "was last called (last_reflect_at, reflects_last_7_days), suggested promotions, "
        "demotions and archiving (never applied by themselves: ask the user first), and "
        "any warnings. Takes no arguments and changes nothing."
    ),
    annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False),
    handler=status,
)
