"""What happened to a user's store: revisions of memories, closing reflections, snapshots,
reflect calls and dismissed suggestions."""

import uuid
from typing import Any

from django.conf import settings
from django.db import models

from memories.models.choices import ChangeSource, RevisionAction, SuggestionKind, User
from memories.timeutil import isoformat


class Revision(models.Model):
    """The tracked fields of a memory before and after one change."""

    memory = models.ForeignKey(
        "memories.Memory", on_delete=models.CASCADE, related_name="revisions"
    )
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    source = models.CharField(max_length=16, choices=ChangeSource.choices)
    action = models.CharField(max_length=32, choices=RevisionAction.choices)
    created_at = models.DateTimeField()
    changed_fields = models.JSONField(default=list)
    before = models.JSONField()
    after = models.JSONField()

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["memory", "-created_at"], name="revision_memory_created")]

    def __str__(self) -> str:
        return f"{self.action} via {self.source} at {isoformat(self.created_at)}"


class ClosingQuerySet(models.QuerySet["Closing"]):
    def for_owner(self, owner: User) -> "ClosingQuerySet":
        return self.filter(owner=owner)

    def newest_first(self) -> "ClosingQuerySet":
        return self.order_by("-created_at", "-id")


class Closing(models.Model):
    """A closing reflection, written at the end of a conversation. Permanent."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="closings"
    )
    reflection = models.TextField()
    conversation_title = models.TextField(null=True, blank=True)  # noqa: DJ001
    conversation_url = models.TextField(null=True, blank=True)  # noqa: DJ001
    created_at = models.DateTimeField()

    objects = ClosingQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["owner", "-created_at"], name="closing_owner_created")]

    def __str__(self) -> str:
        return self.conversation_title or f"Closing of {isoformat(self.created_at)}"

    def as_record(self) -> dict[str, Any]:
        return {
            "id": str(self.id),
            "reflection": self.reflection,
            "conversation_title": self.conversation_title,
            "conversation_url": self.conversation_url,
            "created_at": isoformat(self.created_at),
        }


class Snapshot(models.Model):
    """A backup of some or all of a user's records, taken before bulk changes.

    Older snapshots hold their records in `records`; newer ones hold them in
    SnapshotRecord rows, written and read in batches (`records` then says so), which also
    name the records a change created (an import's undo deletes them).
    """

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="snapshots"
    )
    created_at = models.DateTimeField()
    reason = models.CharField(max_length=64)
    memory_count = models.PositiveIntegerField(default=0)
    records = models.JSONField()
    # An import writing in committed batches: its snapshot is complete once the import
    # is. One left incomplete by a process that is gone is undone (its records removed).
    in_progress = models.BooleanField(default=False)
    worker = models.CharField(max_length=200, blank=True, default="")
    heartbeat_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(
                fields=["owner"],
                condition=models.Q(in_progress=True),
                name="snapshot_in_progress",
            )
        ]

    def __str__(self) -> str:
        return f"{self.reason} ({isoformat(self.created_at)})"


class SnapshotRecord(models.Model):
    """One record of a row-kept snapshot: a memory's or a closing's value as it was (to
    put back), or the id of one the change created (to remove)."""

    class Kind(models.TextChoices):
        MEMORY = "memory"
        CLOSING = "closing"
        CREATED_MEMORY = "created_memory"
        CREATED_CLOSING = "created_closing"

    snapshot = models.ForeignKey(Snapshot, on_delete=models.CASCADE, related_name="rows")
    kind = models.CharField(max_length=16, choices=Kind.choices)
    record_id = models.UUIDField()
    value = models.JSONField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["snapshot", "kind", "id"], name="snapshot_rows")]

    def __str__(self) -> str:
        return f"{self.kind} {self.record_id}"


class ReflectCall(models.Model):
    """One taproot_reflect tool call: when, and through which OAuth client. It tells whether
    Claude loaded the memory (status, the dashboard, the reflect hint); status and the
    dashboard preview build the payload without leaving one."""

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+", db_index=False
    )
    called_at = models.DateTimeField()
    # Copied from the OAuth application: it outlives the client's registration.
    client_id = models.CharField(max_length=255, blank=True)
    client_name = models.CharField(max_length=255, blank=True)

    class Meta:
        indexes = [models.Index(fields=["owner", "called_at"], name="reflectcall_owner_called")]

    def __str__(self) -> str:
        return f"{self.client_name or 'unknown client'} at {isoformat(self.called_at)}"


class DismissedSuggestion(models.Model):
    """A suggestion a person turned down: the same one is not made again for this memory."""

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+", db_index=False
    )
    memory = models.ForeignKey("memories.Memory", on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=16, choices=SuggestionKind.choices)
    dismissed_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["memory", "kind"], name="dismissedsuggestion_unique")
        ]
        # An owner's dismissals of one kind: the suggestions' counts leave them out.
        indexes = [models.Index(fields=["owner", "kind"], name="dismissed_owner_kind")]

    def __str__(self) -> str:
        return f"{self.kind} dismissed at {isoformat(self.dismissed_at)}"
