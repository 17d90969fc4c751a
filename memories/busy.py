"""When every pooled database connection is lent out.

A request that waits longer than TAPROOT_DB_POOL_TIMEOUT for a connection is answered
503 with Retry-After, on /mcp (by the ASGI entry point) and on Django's pages alike: the
server is busy rather than broken, and a client that tries again shortly gets through.
"""

from collections.abc import Callable

from django.db import DatabaseError
from django.http import HttpRequest, HttpResponse
from psycopg_pool import PoolTimeout

RETRY_AFTER_SECONDS = 5
BUSY_MESSAGE = (
    "Taproot is busy: every database connection is in use. "
    f"Try again in {RETRY_AFTER_SECONDS} seconds."
)


def is_pool_timeout(error: BaseException) -> bool:
    """True for the database error Django raises when no pooled connection came free."""
    return isinstance(error, DatabaseError) and isinstance(error.__cause__, PoolTimeout)


class PoolTimeoutMiddleware:
    """Answers a Django request that found no free database connection with 503."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not is_pool_timeout(exception):
            return None
        response = HttpResponse(BUSY_MESSAGE, status=503, content_type="text/plain")
        response["Retry-After"] = str(RETRY_AFTER_SECONDS)
        return response
