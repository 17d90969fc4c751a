"""The Import page: a store from another memory server (or a Taproot export) checked
first, its dry run shown, and imported on confirmation of that same file."""

import hashlib

from django.db import reset_queries
from django.http import HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_http_methods

from dashboard.decorators import DashboardRequest, login_required
from dashboard.forms import ImportForm
from memories.errors import InvalidInput
from memories.models import Category
from memories.portability import file_too_large
from memories.services import Imported, import_store

# What the form's other fields may add to the file's size in a request.
_FORM_OVERHEAD = 64 * 1024
NOT_CHECKED = (
    "This is not the file that was checked (or it changed since). Check it first, then import it."
)


@login_required
@require_http_methods(["GET", "POST"])
def import_page(request: DashboardRequest) -> HttpResponse:
    if request.method == "GET":
        return _page(request, ImportForm())
    # Refused on its declared length before the form reads a byte of it.
    try:
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        declared = 0  # the form's own parsing then says what is wrong
    if refusal := file_too_large(max(0, declared - _FORM_OVERHEAD)):
        return _page(request, ImportForm(), error=refusal.message, status=413)
    form = ImportForm(request.POST, request.FILES)
    if not form.is_valid():
        return _page(request, form, status=400)
    upload = form.cleaned_data["file"]
    if refusal := file_too_large(upload.size):
        return _page(request, form, error=refusal.message, status=413)
    data = upload.read()
    fingerprint = hashlib.sha256(data).hexdigest()
    confirm = "confirm" in request.POST
    if confirm and form.cleaned_data["checked"] != fingerprint:
        return _page(request, form, error=NOT_CHECKED, status=409)
    category = form.cleaned_data["category"]
    try:
        imported = import_store(
            owner=request.user,
            data=data,
            source=form.cleaned_data["source"] or None,
            category=Category(category) if category else None,
            dry_run=not confirm,
            # With DEBUG on, Django keeps the last 9,000 statements of a request; a large
            # import's bulk inserts would make that hundreds of megabytes.
            progress=lambda stage, records: reset_queries(),
        )
    except InvalidInput as refused:  # an import's refusals are sentences already
        return _page(request, form, error=refused.message, status=422)
    return _page(request, form, imported=imported, fingerprint=fingerprint, name=upload.name)


def _page(
    request: DashboardRequest,
    form: ImportForm,
    *,
    imported: Imported | None = None,
    error: str | None = None,
    fingerprint: str = "",
    name: str = "",
    status: int = 200,
) -> HttpResponse:
    context = {
        "form": form,
        "imported": imported,
        "error": error,
        "fingerprint": fingerprint,
        "file_name": name,
        "rows": _rows(imported) if imported else [],
    }
    template = "dashboard/import.html"
    if request.htmx and request.method == "POST":
        template += "#import-result"
    return render(request, template, context, status=status)


def _rows(imported: Imported) -> list[tuple[str, int, int]]:
    """(category, new, already present), per category the import touches."""
    categories = sorted({*imported.created_by_category, *imported.skipped_by_category})
    return [
        (
            category,
            imported.created_by_category.get(category, 0),
            imported.skipped_by_category.get(category, 0),
        )
        for category in categories
    ]
