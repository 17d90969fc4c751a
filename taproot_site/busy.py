"""Django's requests that find the database busy: every pooled connection lent out, or a
lock not granted in time (SQLite's one write lock held longer than its busy timeout).

A request that waits longer than TAPROOT_DB_POOL_TIMEOUT for a connection, or than the
busy timeout for a lock, is answered 503 with Retry-After, on Django's pages as on /mcp
(mcp_bridge.admission): the server is busy rather than broken, and a client that tries
again shortly gets through. The words
and the wait are /mcp's own (mcp_bridge.database), so both answer alike.
"""

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse

from mcp_bridge.database import RETRY_AFTER_SECONDS, busy_message


class PoolTimeoutMiddleware:
    """Answers a Django request that found no free database connection with 503."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        message = busy_message(exception)
        if message is None:
            return None
        response = HttpResponse(message, status=503, content_type="text/plain")
        response["Retry-After"] = str(RETRY_AFTER_SECONDS)
        return response
