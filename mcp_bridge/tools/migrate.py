"""taproot_migrate: bring the user's store up to the current format."""

from mcp_bridge.toolkit import Reply, ToolDefinition, hints
from memories import services
from memories.models import User


def migrate(*, owner: User) -> Reply:
    # Always the token's user: the service migrates every user's store when owner is None.
    migrated = services.migrate(owner=owner)
    (mine,) = migrated.owners
    return {
        "status": "ok",
        "dry_run": migrated.dry_run,
        "migrated": migrated.migrated,
        "already_migrated": migrated.total - migrated.migrated,
        "total": migrated.total,
        "snapshot_id": mine.snapshot_id,
        "category_counts_before": migrated.counts_before,
        "category_counts_after": migrated.counts_after,
        "message": migrated.message,
    }


TOOL = ToolDefinition(
    name="taproot_migrate",
    position=7,
    title="Repair the store",
    description=(
        "Bring the user's stored memories up to the current format, for a store carried "
        "over from an older Taproot or an import: legacy category names and numeric "
        "salience become the current values, tags and keywords written as text become "
        "lists, and memories without a gist get one made from their first sentence. A "
        "snapshot of the affected records is taken first; content is never changed; a "
        "second run changes nothing. Returns {status, migrated, already_migrated, total, "
        "snapshot_id, category_counts_before, category_counts_after}."
    ),
    annotations=hints(read_only=False, idempotent=True),
    handler=migrate,
)
