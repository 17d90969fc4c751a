"""The Suggestions panel: promotions, demotions and archiving the recall history points
to, applied through the same services as the tools, or dismissed for good."""

import uuid
from dataclasses import dataclass
from typing import Any

from django.contrib import messages
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_POST
from django_htmx.http import trigger_client_event

from dashboard.decorators import DashboardRequest, login_required
from dashboard.messages import say
from dashboard.overview import store_overview
from memories.errors import DomainError, SuggestionStale, UnknownMemory
from memories.models import ChangeSource, SuggestionKind, User
from memories.services import (
    SuggestionGroup,
    apply_suggestion,
    dismiss_suggestion,
    suggestions,
)
from memories.shortids import short_ids
from memories.vocabulary import ARCHIVE, DEMOTE, PROMOTE

# How many memories of each kind the panel lists.
PANEL_SAMPLE = 10
# (heading, button, what applying did) for each kind.
WORDING = {
    PROMOTE: ("Promote to core", "Promote", "moved into the core tier"),
    DEMOTE: ("Demote from core", "Demote", "moved out of the core tier"),
    ARCHIVE: ("Archive", "Archive", "archived"),
}
# Tells the page which memory changed, so its card (if shown) is read again.
CHANGED_EVENT = "taproot:memory-changed"


@dataclass(frozen=True)
class PanelGroup:
    group: SuggestionGroup
    heading: str
    button: str

    @property
    def more(self) -> int:
        return self.group.count - len(self.group.memories)


def panel_context(owner: User, *, message: str = "", failed: bool = False) -> dict[str, Any]:
    groups = [
        PanelGroup(group, *WORDING[group.kind][:2])
        for group in suggestions(owner=owner, limit=PANEL_SAMPLE)
    ]
    return {
        "suggestion_groups": [g for g in groups if g.group.count],
        "suggestion_total": sum(g.group.count for g in groups),
        "suggestion_message": message,
        "suggestion_failed": failed,
    }


def _kind(kind: str) -> SuggestionKind:
    if kind not in WORDING:
        raise Http404("No such kind of suggestion.")
    return SuggestionKind(kind)


@login_required
@require_POST
def apply(request: DashboardRequest, memory_id: uuid.UUID, kind: str) -> HttpResponse:
    suggestion = _kind(kind)
    try:
        apply_suggestion(
            owner=request.user, memory_id=memory_id, kind=suggestion, source=ChangeSource.DASHBOARD
        )
    except UnknownMemory:
        raise Http404("No such memory.") from None
    except SuggestionStale as stale:
        # A conflict with the store as it is now, not bad input: the panel shows it anew.
        return _answer(request, memory_id, say(stale), status=409)
    except DomainError as error:
        return _answer(request, memory_id, say(error), status=422)
    return _answer(request, memory_id, f"{_named(request, memory_id)} {WORDING[kind][2]}.")


@login_required
@require_POST
def dismiss(request: DashboardRequest, memory_id: uuid.UUID, kind: str) -> HttpResponse:
    suggestion = _kind(kind)
    try:
        dismiss_suggestion(owner=request.user, memory_id=memory_id, kind=suggestion)
    except UnknownMemory:
        raise Http404("No such memory.") from None
    return _answer(
        request, memory_id, f"Dismissed: {_named(request, memory_id)} will not be suggested again."
    )


def _named(request: DashboardRequest, memory_id: uuid.UUID) -> str:
    return f"Memory {short_ids(request.user, [memory_id])[memory_id]}"


def _answer(
    request: DashboardRequest, memory_id: uuid.UUID, message: str, *, status: int = 200
) -> HttpResponse:
    """The panel again, with the header counts and the preview out of band (htmx), or
    back to the list with the message (a plain form post)."""
    if not request.htmx:
        if status == 200:
            messages.success(request, message)
        else:
            messages.error(request, message)
        return redirect("dashboard:index")
    overview = store_overview(request.user, now=timezone.now())
    context = panel_context(request.user, message=message, failed=status != 200)
    context.update(counts=overview.counts, preview=overview.preview)
    response = render(request, "dashboard/suggestions_update.html", context, status=status)
    return trigger_client_event(response, CHANGED_EVENT, {"id": str(memory_id)})
