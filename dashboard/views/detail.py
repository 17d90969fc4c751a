"""One memory in full: every field, its links, its revisions, and restoring one."""

import uuid
from dataclasses import dataclass
from typing import Any, Literal

from django.contrib import messages
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods
from django.views.decorators.vary import vary_on_headers

from dashboard.decorators import DashboardRequest, login_required
from dashboard.forms import RestoreForm
from dashboard.messages import say
from dashboard.notes import attach_display_ids
from memories.conf import catalog_window_days
from memories.errors import RestoreOutdated, UnknownMemory, UnknownRevision
from memories.models import ChangeSource, Memory, Revision
from memories.services import preview_restore
from memories.services import restore_revision as restore_memory_revision


@dataclass(frozen=True)
class FieldChange:
    field: str
    before: Any
    after: Any


@dataclass(frozen=True)
class RevisionView:
    revision: Revision
    changes: list[FieldChange]


@dataclass(frozen=True)
class LinkedMemory:
    id: str
    memory: Memory | None  # None when the id names nothing of this owner's
    short_id: str = ""


@login_required
@require_GET
def memory_detail(request: DashboardRequest, memory_id: uuid.UUID) -> HttpResponse:
    return render(request, "dashboard/memory_detail.html", _detail_context(request, memory_id))


@login_required
@require_http_methods(["GET", "POST"])
@vary_on_headers("HX-Request")
def restore_revision(request: DashboardRequest, revision_id: int) -> HttpResponse:
    """GET shows what restoring would change, field by field, and asks; POST applies it,
    only while the memory is still as that preview showed it (else shows the new one)."""
    form = RestoreForm(request.POST if request.method == "POST" else request.GET)
    if not form.is_valid() and "use" in form.errors:
        revision = get_object_or_404(Revision, pk=revision_id, owner=request.user)
        error = "Choose whether to restore the state before or after this change."
        return _restored(request, _own_memory(request, revision.memory_id), error)
    use = form.cleaned_data["use"]
    version = form.cleaned_data.get("version")
    if request.method == "GET" or not version:
        return _asked(request, revision_id, use)
    try:
        restored = restore_memory_revision(
            owner=request.user,
            revision_id=revision_id,
            source=ChangeSource.DASHBOARD,
            use=use,
            expected_version=version,
        )
    except (UnknownRevision, UnknownMemory):
        raise Http404("No such revision.") from None
    except RestoreOutdated as outdated:
        return _asked(request, revision_id, use, error=say(outdated), status=409)
    return _restored(request, restored.memory, "")


def _asked(
    request: DashboardRequest,
    revision_id: int,
    use: Literal["before", "after"],
    *,
    error: str = "",
    status: int = 200,
) -> HttpResponse:
    """The memory's page with what restoring this revision would change now, and the
    question (the whole page, or its #memory-detail for htmx)."""
    try:
        pending = preview_restore(owner=request.user, revision_id=revision_id, use=use)
    except (UnknownRevision, UnknownMemory):
        raise Http404("No such revision.") from None
    context = _detail_of(request, pending.memory)
    context.update(pending=pending, restore_error=error)
    template = "dashboard/memory_detail.html"
    if request.htmx:
        template += "#memory-detail"
    return render(request, template, context, status=status)


def _restored(request: DashboardRequest, memory: Memory, error: str) -> HttpResponse:
    """The memory's page after a restore (or a refused one), from the memory as it stands."""
    if not request.htmx:
        if error:
            messages.error(request, error)
        else:
            messages.success(request, "The revision was restored.")
        return redirect("dashboard:memory", memory_id=memory.pk)
    context = _detail_of(request, memory)
    context["error"] = error
    context["restored"] = not error
    return render(
        request,
        "dashboard/memory_detail.html#memory-detail",
        context,
        status=422 if error else 200,
    )


def _own_memory(request: DashboardRequest, memory_id: uuid.UUID) -> Memory:
    return get_object_or_404(Memory, pk=memory_id, owner=request.user)


def _detail_context(request: DashboardRequest, memory_id: uuid.UUID) -> dict[str, Any]:
    return _detail_of(request, _own_memory(request, memory_id))


def _detail_of(request: DashboardRequest, memory: Memory) -> dict[str, Any]:
    memory.tier = memory.tier_at(timezone.now(), catalog_window_days())  # type: ignore[attr-defined]
    revisions = [
        RevisionView(
            revision=revision,
            changes=[
                FieldChange(name, revision.before.get(name), revision.after.get(name))
                for name in revision.changed_fields
            ],
        )
        for revision in memory.revisions.all()
    ]
    linked = _linked(request, memory)
    shown = attach_display_ids(request.user, [memory], also=(uuid.UUID(link.id) for link in linked))
    linked = [LinkedMemory(link.id, link.memory, shown[uuid.UUID(link.id)]) for link in linked]
    return {
        "memory": memory,
        "revisions": revisions,
        "last_change": revisions[0].revision if revisions else None,
        "linked": linked,
    }


def _linked(request: DashboardRequest, memory: Memory) -> list[LinkedMemory]:
    ids: list[str] = []
    for value in memory.linked_memories if isinstance(memory.linked_memories, list) else []:
        try:
            ids.append(str(uuid.UUID(str(value))))
        except ValueError:
            continue
    if not ids:
        return []
    found = {str(m.pk): m for m in Memory.objects.for_owner(request.user).filter(pk__in=ids)}
    return [LinkedMemory(id=i, memory=found.get(i)) for i in ids]
