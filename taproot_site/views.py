"""Site-level views that belong to no app."""

import logging

from django.conf import settings
from django.db import DatabaseError, connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.cache import cache_control, never_cache
from django.views.decorators.http import require_GET, require_safe

from mcp_bridge.database import is_pool_timeout

logger = logging.getLogger("taproot.health")

FAVICON = settings.BASE_DIR / "static" / "img" / "favicon.ico"


@never_cache
@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    """Liveness plus a round trip to the database; no authentication."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except DatabaseError as error:
        if is_pool_timeout(error):
            raise  # reachable but busy: PoolTimeoutMiddleware answers 503 with Retry-After
        logger.exception("health check: database unreachable")
        return JsonResponse({"status": "error", "database": "unreachable"}, status=503)
    return JsonResponse({"status": "ok", "database": "ok"})


@require_safe
@cache_control(public=True, max_age=24 * 60 * 60)
def favicon(request: HttpRequest) -> HttpResponse:
    """The icon the pages link, also at the root, where browsers and tools look first."""
    return HttpResponse(FAVICON.read_bytes(), content_type="image/x-icon")
