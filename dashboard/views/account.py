"""The rest of the store: closing reflections, the export download, connected clients."""

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import Http404, HttpResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_http_methods
from django.views.decorators.vary import vary_on_headers

from dashboard.clients import connected_clients
from dashboard.decorators import DashboardRequest, login_required
from memories.models import Closing
from memories.portability import Export, ExportBusy
from oauth.clients import revoke_client

CLOSINGS_PAGE_SIZE = 20
REVOKED_MESSAGE = "Access revoked. The client must ask for your consent again."


@login_required
@require_GET
def closings(request: DashboardRequest) -> HttpResponse:
    page = Paginator(Closing.objects.for_owner(request.user).newest_first(), CLOSINGS_PAGE_SIZE)
    return render(
        request, "dashboard/closings.html", {"page": page.get_page(request.GET.get("page"))}
    )


@never_cache
@login_required
@require_GET
def export(request: DashboardRequest) -> HttpResponseBase:
    """The whole store as the JSON `import_taproot` reads back, sent as it is read."""
    now = timezone.now()
    try:
        content = Export(owner=request.user, now=now)
    except ExportBusy as busy:
        # Refused rather than queued: a waiting download would hold a worker and, on
        # PostgreSQL, a pooled connection for as long as the first one takes.
        refusal = render(
            request, "dashboard/export_busy.html", {"message": busy.message}, status=429
        )
        refusal["Retry-After"] = "30"
        return refusal
    response = StreamingHttpResponse(content, content_type="application/json; charset=utf-8")
    filename = f"taproot-export-{now:%Y-%m-%d}.json"
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


@login_required
@require_GET
def clients(request: DashboardRequest) -> HttpResponse:
    return render(request, "dashboard/clients.html", {"clients": connected_clients(request.user)})


@login_required
@require_http_methods(["GET", "POST"])
@vary_on_headers("HX-Request")
def revoke(request: DashboardRequest, application_id: int) -> HttpResponse:
    """GET asks first (in the client's card, or on the page); POST takes back every token
    and grant this client holds for the logged-in user."""
    if request.method == "GET":
        clients = connected_clients(request.user)
        client = next((c for c in clients if c.id == application_id), None)
        if client is None:
            raise Http404("This client holds nothing for you.")
        if request.htmx:
            context = {"client": client, "confirm_revoke": client.id}
            return render(request, "dashboard/clients.html#client-card", context)
        return render(
            request, "dashboard/clients.html", {"clients": clients, "confirm_revoke": client.id}
        )
    if not revoke_client(request.user, application_id):
        raise Http404("This client holds nothing for you.")
    if request.htmx:
        return render(
            request,
            "dashboard/clients.html#client-list",
            {"clients": connected_clients(request.user), "revoked": True},
        )
    messages.success(request, REVOKED_MESSAGE)
    return redirect("dashboard:clients")
