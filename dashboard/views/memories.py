"""The memory list and the inline edits made on its cards.

Every edit goes through memories.services and answers an htmx request with the card
alone, plus out-of-band swaps of the header counts and the Reflect Preview. Without
htmx the same URLs work as plain form posts that redirect back.
"""

import uuid
from collections.abc import Callable
from contextlib import suppress
from typing import Any

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django.views.decorators.vary import vary_on_headers

from dashboard.decorators import DashboardRequest, login_required
from dashboard.forms import CurationForm, GistForm, MemoryFilterForm
from dashboard.messages import say
from dashboard.notes import attach_display_ids
from dashboard.overview import store_overview
from dashboard.views.suggestions import panel_context
from memories.conf import catalog_window_days
from memories.errors import DomainError, UnknownMemory
from memories.models import ChangeSource, Memory, Salience
from memories.services import archive as archive_memory
from memories.services import delete as delete_memory
from memories.services import edit_gist as edit_memory_gist
from memories.services import set_curation
from memories.services import unarchive as unarchive_memory
from memories.shortids import attach_short_ids

PAGE_SIZE = 25
ARCHIVE_REASON = "Archived from the dashboard."


@login_required
@require_GET
@vary_on_headers("HX-Request")
def index(request: DashboardRequest) -> HttpResponse:
    now = timezone.now()
    window_days = catalog_window_days()
    form = MemoryFilterForm(request.GET)
    form.is_valid()  # fields that fail are reported and left out of the filter
    memories = form.filter(
        Memory.objects.for_owner(request.user).with_tier(now, window_days),
        now=now,
        window_days=window_days,
    )
    page = Paginator(memories, PAGE_SIZE).get_page(request.GET.get("page"))
    attach_display_ids(request.user, page)
    context: dict[str, Any] = {"form": form, "page": page, "query": form.query_string()}
    status = 400 if form.errors else 200
    if _wants_fragment(request, "memory-list"):
        context["counts"] = Memory.objects.for_owner(request.user).state_counts()
        return render(request, "dashboard/memory_list_update.html", context, status=status)
    overview = store_overview(request.user, now=now)
    context.update(counts=overview.counts, preview=overview.preview)
    context.update(panel_context(request.user))
    return render(request, "dashboard/index.html", context, status=status)


def _wants_fragment(request: DashboardRequest, target: str) -> bool:
    htmx = request.htmx
    return bool(htmx) and not htmx.history_restore_request and htmx.target == target


@login_required
@require_GET
@vary_on_headers("HX-Request")
def memory_card(request: DashboardRequest, memory_id: uuid.UUID) -> HttpResponse:
    """One card as shown in the list (used to leave an edit without saving).

    The card is a fragment: a link opened outside htmx (a new tab) goes to the memory.
    """
    if not request.htmx:
        _own_memory(request, memory_id)
        return redirect("dashboard:memory", memory_id=memory_id)
    return _card_update(request, memory_id)


@login_required
@require_POST
def curate(request: DashboardRequest, memory_id: uuid.UUID) -> HttpResponse:
    """Salience and core from the card: saved at once, updated_at left alone."""
    form = CurationForm(request.POST)
    if not form.is_valid():
        return _refused(request, memory_id, _form_error(form))
    salience = form.cleaned_data["salience"]
    return _edited(
        request,
        memory_id,
        lambda: set_curation(
            owner=request.user,
            memory_id=memory_id,
            core=form.cleaned_data["core"],
            salience=Salience(salience) if salience else None,
            source=ChangeSource.DASHBOARD,
        ),
    )


@login_required
@require_http_methods(["GET", "POST"])
@vary_on_headers("HX-Request")
def edit_gist(request: DashboardRequest, memory_id: uuid.UUID) -> HttpResponse:
    """GET: the card with the gist open for editing. POST: save it (clears the auto mark)."""
    if request.method == "GET":
        memory = _own_memory(request, memory_id)
        form = GistForm(initial={"gist": memory.gist})
        if not request.htmx:
            return render(
                request, "dashboard/memory_gist.html", {"memory": memory, "gist_form": form}
            )
        return _card_update(request, memory_id, gist_form=form)
    form = GistForm(request.POST)
    if not form.is_valid():
        return _refused(request, memory_id, _form_error(form), gist_form=form)
    return _edited(
        request,
        memory_id,
        lambda: edit_memory_gist(
            owner=request.user,
            memory_id=memory_id,
            gist=form.cleaned_data["gist"],
            source=ChangeSource.DASHBOARD,
        ),
        gist_form=form,
    )


@login_required
@require_POST
def archive(request: DashboardRequest, memory_id: uuid.UUID) -> HttpResponse:
    return _edited(
        request,
        memory_id,
        lambda: (
            archive_memory(
                owner=request.user,
                memory_id=memory_id,
                reason=ARCHIVE_REASON,
                source=ChangeSource.DASHBOARD,
            ).memory
        ),
    )


@login_required
@require_POST
def unarchive(request: DashboardRequest, memory_id: uuid.UUID) -> HttpResponse:
    return _edited(
        request,
        memory_id,
        lambda: (
            unarchive_memory(
                owner=request.user, memory_id=memory_id, source=ChangeSource.DASHBOARD
            ).memory
        ),
    )


@login_required
@require_http_methods(["GET", "POST"])
@vary_on_headers("HX-Request")
def delete(request: DashboardRequest, memory_id: uuid.UUID) -> HttpResponse:
    """GET asks first (in the card, or as a page); POST deletes for good."""
    memory = _own_memory(request, memory_id)
    if request.method == "GET":
        if request.htmx:
            return _card_update(request, memory_id, confirm_delete=True)
        attach_short_ids(request.user, [memory])
        return render(request, "dashboard/memory_delete.html", {"memory": memory})
    # Deleted elsewhere since the check above is the outcome asked for.
    with suppress(UnknownMemory):
        delete_memory(owner=request.user, memory_id=memory_id)
    if not request.htmx:
        messages.success(request, "The memory was deleted.")
        return redirect("dashboard:index")
    overview = store_overview(request.user, now=timezone.now())
    return render(
        request,
        "dashboard/card_deleted.html",
        {"memory": memory, "counts": overview.counts, "preview": overview.preview},
    )


def _edited(
    request: DashboardRequest, memory_id: uuid.UUID, edit: Callable[[], Memory], **extra: Any
) -> HttpResponse:
    """Make one edit through its service and answer with the memory as it left it (read
    once, by the service); a refusal is said on the card."""
    try:
        memory = edit()
    except UnknownMemory as gone:
        if request.htmx:  # the card has nothing left to show
            raise Http404("No such memory.") from None
        messages.error(request, say(gone))
        return _back(request)
    except DomainError as error:
        return _refused(request, memory_id, say(error), **extra)
    if not request.htmx:
        messages.success(request, "Saved.")
        return _back(request)
    return _card(request, memory)


def _own_memory(request: DashboardRequest, memory_id: uuid.UUID) -> Memory:
    return get_object_or_404(Memory, pk=memory_id, owner=request.user)


def _card_update(
    request: DashboardRequest, memory_id: uuid.UUID, *, status: int = 200, **extra: Any
) -> HttpResponse:
    """The card as stored, with the header counts and the preview swapped out of band."""
    return _card(request, _own_memory(request, memory_id), status=status, **extra)


def _card(
    request: DashboardRequest, memory: Memory, *, status: int = 200, **extra: Any
) -> HttpResponse:
    now = timezone.now()
    memory.tier = memory.tier_at(now, catalog_window_days())  # type: ignore[attr-defined]
    attach_display_ids(request.user, [memory])
    overview = store_overview(request.user, now=now)
    context = {"memory": memory, "counts": overview.counts, "preview": overview.preview}
    return render(request, "dashboard/card_update.html", context | extra, status=status)


def _refused(
    request: DashboardRequest, memory_id: uuid.UUID, message: str, **extra: Any
) -> HttpResponse:
    """Nothing changed: say why in the card (422), or on the page without htmx."""
    if request.htmx:
        return _card_update(request, memory_id, status=422, error=message, **extra)
    messages.error(request, message)
    return _back(request)


def _back(request: DashboardRequest) -> HttpResponse:
    target = request.POST.get("next", "")
    if target and url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return redirect(target)
    return redirect("dashboard:index")


def _form_error(form: Any) -> str:
    return " ".join(str(message) for errors in form.errors.values() for message in errors)
