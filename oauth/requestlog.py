"""One log line per OAuth request, for debugging a connector that will not connect.

Covers /o/* and /.well-known/*: method, path (never the query string, which carries
codes and state), status, duration, caller address and the client id when the request
or the registration reply names one. Secrets, codes and tokens are never logged.

A refusal (4xx) logged here is not logged again by Django's `django.request` warning
("Bad Request: /o/token/"): one refused refresh, one line. A server error still is, with
its traceback.
"""

import base64
import binascii
import json
import logging
import time
from collections.abc import Callable
from urllib.parse import unquote

from django.http import HttpRequest, HttpResponse
from django.http.request import RawPostDataException

from oauth.throttle import client_ip

logger = logging.getLogger("taproot.oauth.requests")

LOGGED_PREFIXES = ("/o/", "/.well-known/")
MAX_CLIENT_ID_LENGTH = 255


def _basic_auth_client_id(request: HttpRequest) -> str:
    header = request.META.get("HTTP_AUTHORIZATION", "")
    scheme, _, encoded = header.partition(" ")
    if scheme.lower() != "basic":
        return ""
    try:
        decoded = base64.b64decode(encoded.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return ""
    return unquote(decoded.partition(":")[0])


def _registered_client_id(response: HttpResponse) -> str:
    if response.status_code != 201 or response.get("Content-Type") != "application/json":
        return ""
    try:
        return str(json.loads(response.content).get("client_id", ""))
    except (ValueError, AttributeError):
        return ""


def _form_client_id(request: HttpRequest) -> str:
    if request.method != "POST":
        return ""
    try:
        return request.POST.get("client_id", "")
    except RawPostDataException:  # a body the view read raw (JSON): no form fields
        return ""


def client_id_of(request: HttpRequest, response: HttpResponse) -> str:
    """The client a request is about, as far as it can be told without reading secrets."""
    client_id = (
        request.GET.get("client_id")
        or _form_client_id(request)
        or _basic_auth_client_id(request)
        or _registered_client_id(response)
    )
    return (client_id or "-")[:MAX_CLIENT_ID_LENGTH]


class OAuthRequestLogMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if not request.path.startswith(LOGGED_PREFIXES):
            return self.get_response(request)
        started = time.monotonic()
        response = self.get_response(request)
        elapsed_ms = (time.monotonic() - started) * 1000
        logger.info(
            "%s %s %s %.0fms client=%s ip=%s",
            request.method,
            request.path,
            response.status_code,
            elapsed_ms,
            client_id_of(request, response),
            client_ip(request),
        )
        if response.status_code < 500:
            # Django's own flag for a response already logged (django.utils.log.log_response).
            response._has_been_logged = True  # type: ignore[attr-defined]
        return response
