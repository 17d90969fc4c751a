"""Cross-origin access to the OAuth endpoints for browser-based local clients.

The MCP Inspector's web page (http://localhost:6274) runs the OAuth flow from the
browser, so registration and token requests are cross-origin. When loopback clients are
on, pages served from a loopback origin may call /o/register/, /o/token/ and
/o/revoke_token/ (no cookies are involved). The discovery documents are readable from
any origin already. Remote origins get no CORS headers at all.
"""

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.utils.cache import patch_vary_headers

from oauth.redirects import loopback_parts

CORS_PATHS = frozenset({"/o/register/", "/o/token/", "/o/revoke_token/"})
PREFLIGHT_MAX_AGE = "600"


def is_loopback_origin(origin: str) -> bool:
    parts = loopback_parts(origin)
    return (
        parts is not None
        and parts.scheme in {"http", "https"}
        and not (parts.path or parts.query or parts.fragment or parts.username)
    )


class LoopbackCorsMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        origin = request.headers.get("Origin", "")
        allowed = (
            request.path in CORS_PATHS
            and settings.TAPROOT_ALLOW_LOOPBACK_CLIENTS
            and is_loopback_origin(origin)
        )
        if not allowed:
            return self.get_response(request)
        if request.method == "OPTIONS" and "Access-Control-Request-Method" in request.headers:
            response = HttpResponse(status=204)
            response["Access-Control-Allow-Methods"] = "POST, OPTIONS"
            response["Access-Control-Allow-Headers"] = "Authorization, Content-Type"
            response["Access-Control-Max-Age"] = PREFLIGHT_MAX_AGE
        else:
            response = self.get_response(request)
        response["Access-Control-Allow-Origin"] = origin
        patch_vary_headers(response, ["Origin"])
        return response
