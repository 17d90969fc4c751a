"""/healthz for a probe on the machine itself, whatever ALLOWED_HOSTS says.

Once ALLOWED_HOSTS names only the public host, a probe of http://127.0.0.1:PORT/healthz
sends `Host: 127.0.0.1` and Django answers 400 before the view runs. This middleware answers
that one path for the loopback names before Django reads the Host header; every other path,
and /healthz under any other name, still goes through Django's host check. The answer
builds no URL from the host, so the name cannot be used against it.
"""

from collections.abc import Callable

from django.db import DatabaseError
from django.http import HttpRequest, HttpResponse
from django.http.request import split_domain_port

from taproot_site.busy import PoolTimeoutMiddleware
from taproot_site.views import healthz

LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "[::1]"})


def names_loopback(host: str) -> bool:
    domain, _port = split_domain_port(host)
    return domain.lower() in LOOPBACK_NAMES


class LoopbackHealthMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.path_info == "/healthz" and names_loopback(request.META.get("HTTP_HOST", "")):
            try:
                return healthz(request)
            except DatabaseError as error:
                busy = PoolTimeoutMiddleware(self.get_response).process_exception(request, error)
                if busy is None:
                    raise
                return busy
        return self.get_response(request)
