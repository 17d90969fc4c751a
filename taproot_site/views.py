"""Site-level views that belong to no app."""

import logging

from django.db import DatabaseError, connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from taproot_site.busy import is_pool_timeout

logger = logging.getLogger("taproot.health")


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
