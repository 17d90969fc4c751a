"""The operator's Django admin: memories of every user, with bulk fixes that go through the
services (so revisions are kept, updated_at behaves and the recall index stays right), and
read-only views of revisions, closings and snapshots.

Memory text is written by a model and may hold markup: it is only ever shown through
Django's escaping (format_html, never mark_safe on model text).
"""

import json
import uuid
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any, cast

from django import forms
from django.contrib import admin, messages
from django.db import transaction
from django.db.models import QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from memories import services
from memories.errors import DomainError
from memories.limits import MAX_GIST, check_text
from memories.models import (
    ChangeSource,
    Closing,
    Memory,
    MemoryQuerySet,
    Revision,
    Salience,
    Snapshot,
    User,
)
from memories.vocabulary import RECORD_FIELDS, category_label

ADMIN_ARCHIVE_REASON = "archived in the admin"
GIST_COLUMN_LENGTH = 100


class OwnScopedAdmin[M: Memory | Revision | Closing | Snapshot](admin.ModelAdmin[M]):
    """Superusers see every user's records; other staff only their own."""

    def get_queryset(self, request: HttpRequest) -> QuerySet[M]:
        queryset = super().get_queryset(request)
        if request.user.is_superuser:
            return queryset
        return queryset.filter(owner=request.user)


class ReadOnlyAdmin[M: Revision | Closing | Snapshot](OwnScopedAdmin[M]):
    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class ArchivedFilter(admin.SimpleListFilter):
    title = "archived"
    parameter_name = "archived"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("yes", "Archived"), ("no", "Live")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        if self.value() == "yes":
            return _memories(queryset).archived()
        if self.value() == "no":
            return _memories(queryset).live()
        return queryset


class CategoryFilter(admin.AllValuesFieldListFilter):
    """Every stored category, drifted ones included, spelled as the dashboard spells them."""

    def choices(self, changelist: Any) -> Iterator[Any]:
        choices = super().choices(changelist)
        yield next(choices)  # "All"
        for choice in choices:
            choice["display"] = category_label(str(choice["display"]))
            yield choice


def _memories(queryset: QuerySet[Any]) -> MemoryQuerySet:
    """The memory admin's querysets start from Memory.objects: they have its methods."""
    return cast(MemoryQuerySet, queryset)


class MemoryForm(forms.ModelForm[Memory]):
    """Only gist, salience and core are edited here, each through its service."""

    gist = forms.CharField(max_length=MAX_GIST, widget=forms.TextInput(attrs={"size": 100}))

    class Meta:
        model = Memory
        fields = ["gist", "salience", "core"]

    def clean_gist(self) -> str:
        try:
            return check_text(self.cleaned_data["gist"].strip(), field="gist", limit=MAX_GIST)
        except DomainError as error:
            raise forms.ValidationError(str(error)) from None


def _bulk(
    modeladmin: admin.ModelAdmin[Memory],
    request: HttpRequest,
    queryset: QuerySet[Memory],
    change: Callable[[User, uuid.UUID], object],
    done: str,
) -> None:
    """Apply one service call per selected memory, as that memory's owner."""
    count = 0
    for memory in queryset.select_related("owner").only("pk", "owner"):
        try:
            change(memory.owner, memory.pk)
        except DomainError as error:
            modeladmin.message_user(request, f"{memory.pk}: {error}", messages.ERROR)
        else:
            count += 1
    modeladmin.message_user(request, f"{done}: {count} memories.", messages.SUCCESS)


def _curation_action(
    name: str, description: str, done: str, **curation: Any
) -> Callable[..., None]:
    """An action that sets salience or core on every selected memory, as the admin."""

    @admin.action(description=description, permissions=["change"])
    def action(
        modeladmin: admin.ModelAdmin[Memory], request: HttpRequest, queryset: QuerySet[Memory]
    ) -> None:
        _bulk(
            modeladmin,
            request,
            queryset,
            lambda owner, pk: services.set_curation(
                owner=owner, memory_id=pk, source=ChangeSource.ADMIN, **curation
            ),
            done,
        )

    action.__name__ = name
    return action


def _salience_action(salience: str) -> Callable[..., None]:
    return _curation_action(
        f"set_salience_{salience}",
        f"Set salience to {salience}",
        f"Salience set to {salience}",
        salience=salience,
    )


def _core_action(core: bool) -> Callable[..., None]:
    if core:
        return _curation_action("add_to_core", "Add to core (Tier 1)", "Added to core", core=True)
    return _curation_action(
        "remove_from_core", "Remove from core (Tier 1)", "Removed from core", core=False
    )


@admin.action(description="Archive", permissions=["change"])
def archive_memories(
    modeladmin: admin.ModelAdmin[Memory], request: HttpRequest, queryset: QuerySet[Memory]
) -> None:
    _bulk(
        modeladmin,
        request,
        _memories(queryset).live(),
        lambda owner, pk: services.archive(
            owner=owner, memory_id=pk, reason=ADMIN_ARCHIVE_REASON, source=ChangeSource.ADMIN
        ),
        "Archived",
    )


@admin.action(description="Unarchive", permissions=["change"])
def unarchive_memories(
    modeladmin: admin.ModelAdmin[Memory], request: HttpRequest, queryset: QuerySet[Memory]
) -> None:
    _bulk(
        modeladmin,
        request,
        _memories(queryset).archived(),
        lambda owner, pk: services.unarchive(owner=owner, memory_id=pk, source=ChangeSource.ADMIN),
        "Unarchived",
    )


@admin.register(Memory)
class MemoryAdmin(OwnScopedAdmin[Memory]):
    form = MemoryForm
    list_display = (
        "gist_line",
        "category_shown",
        "salience",
        "core",
        "archived",
        "last_touched_at",
        "retrieval_count",
        "owner",
    )
    list_filter = (
        "owner",
        ("category", CategoryFilter),
        ("salience", admin.AllValuesFieldListFilter),
        "core",
        ArchivedFilter,
    )
    search_fields = ("gist", "content", "tag_rows__key")
    search_help_text = "Searches gist, content and tags; a full memory id finds that memory."
    list_select_related = ("owner",)
    ordering = ("-last_touched_at", "id")
    list_per_page = 50
    actions = (
        archive_memories,
        unarchive_memories,
        _salience_action(Salience.HIGH),
        _salience_action(Salience.MEDIUM),
        _salience_action(Salience.LOW),
        _core_action(True),
        _core_action(False),
    )
    # Every field of the record is shown, read-only but for what MemoryForm edits (the
    # category is shown as people spell it, by category_shown).
    readonly_fields = (
        "id",
        "owner",
        "category_shown",
        *(name for name in RECORD_FIELDS if name not in {"category", *MemoryForm.Meta.fields}),
        "last_touched_at",
        "revision_history",
    )
    fieldsets = (
        (
            None,
            {"fields": ("id", "owner", "category_shown", "gist", "gist_autogenerated", "content")},
        ),
        ("Curation", {"fields": ("salience", "core", "archived_at", "archive_reason")}),
        (
            "Details",
            {
                "fields": (
                    "tags",
                    "search_keywords",
                    "linked_memories",
                    "epistemic_status",
                    "provenance",
                    "replication_count",
                    "compression_level",
                    "conversation_url",
                    "conversation_id",
                    "transcript_ref",
                )
            },
        ),
        (
            "Bookkeeping",
            {
                "fields": (
                    "created_at",
                    "updated_at",
                    "last_retrieved",
                    "retrieval_count",
                    "last_touched_at",
                )
            },
        ),
        ("Revisions", {"fields": ("revision_history",)}),
    )

    @admin.display(description="gist", ordering="gist")
    def gist_line(self, memory: Memory) -> str:
        text = memory.gist or memory.content
        if len(text) > GIST_COLUMN_LENGTH:
            return text[: GIST_COLUMN_LENGTH - 1] + "…"
        return text

    @admin.display(description="category", ordering="category")
    def category_shown(self, memory: Memory) -> str:
        return category_label(memory.category)

    @admin.display(description="archived", boolean=True, ordering="archived_at")
    def archived(self, memory: Memory) -> bool:
        return memory.is_archived

    @admin.display(description="revisions")
    def revision_history(self, memory: Memory) -> SafeString:
        revisions = memory.revisions.all()[:50]
        if not revisions:
            return format_html("{}", "none")
        return format_html(
            "<ul>{}</ul>",
            format_html_join(
                "",
                '<li><a href="{}">{}</a>: {}</li>',
                (
                    (
                        reverse("admin:memories_revision_change", args=[r.pk]),
                        str(r),
                        ", ".join(r.changed_fields),
                    )
                    for r in revisions
                ),
            ),
        )

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Memory], search_term: str
    ) -> tuple[QuerySet[Memory], bool]:
        try:
            memory_id = uuid.UUID(search_term.strip())
        except ValueError:
            return super().get_search_results(request, queryset, search_term)
        return queryset.filter(pk=memory_id), False

    def has_add_permission(self, request: HttpRequest) -> bool:
        # Memories come in through the tools and import_taproot.
        return False

    def save_model(
        self, request: HttpRequest, obj: Memory, form: forms.ModelForm[Memory], change: bool
    ) -> None:
        data = form.cleaned_data
        changed = set(form.changed_data)
        if not changed & {"gist", "salience", "core"}:
            return
        edit = partial(
            services.edit,
            owner=obj.owner,
            memory_id=obj.pk,
            gist=data["gist"] if "gist" in changed else None,
            salience=Salience(data["salience"]) if "salience" in changed else None,
            core=data["core"] if "core" in changed else None,
            source=ChangeSource.ADMIN,
        )
        # Django's change view saves inside a transaction of its own. The service opens its
        # own, outermost one (durable) after embedding a new gist: inside Django's, the
        # embedding would hold SQLite's only write lock. So the edit runs once the view's
        # transaction has closed: still in this request, before the redirect is sent.
        transaction.on_commit(partial(_apply_edit, request, edit))

    def delete_model(self, request: HttpRequest, obj: Memory) -> None:
        services.delete(owner=obj.owner, memory_id=obj.pk)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Memory]) -> None:
        for memory in queryset.select_related("owner").only("pk", "owner"):
            services.delete(owner=memory.owner, memory_id=memory.pk)


def _apply_edit(request: HttpRequest, edit: Callable[[], object]) -> None:
    try:
        edit()
    except DomainError as error:
        messages.error(request, f"The change was not saved: {error}")


@admin.register(Revision)
class RevisionAdmin(ReadOnlyAdmin[Revision]):
    list_display = ("created_at", "memory_link", "source", "action", "changed", "owner")
    list_filter = ("source", "action", "owner")
    list_select_related = ("owner",)
    search_fields = ("=memory__id",)
    readonly_fields = (
        "memory_link",
        "owner",
        "source",
        "action",
        "created_at",
        "changed_fields",
        "before",
        "after",
    )
    fields = readonly_fields

    @admin.display(description="memory")
    def memory_link(self, revision: Revision) -> SafeString:
        return format_html(
            '<a href="{}">{}</a>',
            reverse("admin:memories_memory_change", args=[revision.memory_id]),
            str(revision.memory_id),
        )

    @admin.display(description="changed")
    def changed(self, revision: Revision) -> str:
        return ", ".join(revision.changed_fields)


@admin.register(Closing)
class ClosingAdmin(ReadOnlyAdmin[Closing]):
    list_display = ("created_at", "title", "reflection_start", "owner")
    list_filter = ("owner",)
    list_select_related = ("owner",)
    search_fields = ("reflection", "conversation_title")
    readonly_fields = (
        "id",
        "owner",
        "conversation_title",
        "conversation_url",
        "reflection",
        "created_at",
    )
    fields = readonly_fields

    @admin.display(description="title", ordering="conversation_title")
    def title(self, closing: Closing) -> str:
        return closing.conversation_title or "—"

    @admin.display(description="reflection")
    def reflection_start(self, closing: Closing) -> str:
        text = closing.reflection
        return text if len(text) <= GIST_COLUMN_LENGTH else text[: GIST_COLUMN_LENGTH - 1] + "…"


@admin.register(Snapshot)
class SnapshotAdmin(ReadOnlyAdmin[Snapshot]):
    list_display = ("id", "created_at", "reason", "memory_count", "owner")
    list_filter = ("reason", "owner")
    list_select_related = ("owner",)
    readonly_fields = (
        "id",
        "owner",
        "reason",
        "created_at",
        "memory_count",
        "covers",
        "how_to_restore",
        "records_json",
    )
    fields = readonly_fields

    def get_queryset(self, request: HttpRequest) -> QuerySet[Snapshot]:
        # The records can be megabytes: load them only on the snapshot's own page.
        return super().get_queryset(request).defer("records")

    @admin.display(description="what it holds")
    def covers(self, snapshot: Snapshot) -> str:
        return services.snapshot_summary(snapshot)

    @admin.display(description="restore")
    def how_to_restore(self, snapshot: Snapshot) -> str:
        return (
            f"Run `manage.py restore_snapshot {snapshot.pk}`. The present state is "
            "snapshotted first, so the restore can be undone."
        )

    @admin.display(description="records")
    def records_json(self, snapshot: Snapshot) -> SafeString:
        text = json.dumps(snapshot.records, indent=2, ensure_ascii=False)
        return format_html('<pre style="white-space: pre-wrap">{}</pre>', text)
