"""The Reflect Preview on its own: a refresh of the sidebar, or a page for narrow screens."""

from django.http import HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_GET
from django.views.decorators.vary import vary_on_headers

from dashboard.decorators import DashboardRequest, login_required
from dashboard.overview import store_overview


@login_required
@require_GET
@vary_on_headers("HX-Request")
def reflect_preview(request: DashboardRequest) -> HttpResponse:
    overview = store_overview(request.user, now=timezone.now())
    context = {"counts": overview.counts, "preview": overview.preview}
    if request.htmx and not request.htmx.history_restore_request:
        return render(request, "dashboard/preview_update.html", context)
    return render(request, "dashboard/preview.html", context)
