"""Dynamic client registration (RFC 7591 / 7592), django-oauth-toolkit's views, hardened.

Anyone may register, because Claude registers itself before anybody logs in, but only
a client whose every redirect URI is on the allowlist (see redirects.py), that asks for
the authorization-code grant (plus refresh) and the `code` response type, from an
address that has not registered too often lately. The reply names the auth method the
client asked for (django-oauth-toolkit always says `client_secret_basic`; its token
endpoint accepts both) and carries `client_id_issued_at` and `client_secret_expires_at`.
"""

import json
import logging
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import reverse
from oauth2_provider.models import get_application_model
from oauth2_provider.views import (
    DynamicClientRegistrationManagementView,
    DynamicClientRegistrationView,
)

from oauth import throttle
from oauth.redirects import redirect_uris_problem

logger = logging.getLogger("taproot.oauth")

SUPPORTED_GRANT_TYPES = frozenset({"authorization_code", "refresh_token"})
SUPPORTED_AUTH_METHODS = ("client_secret_post", "client_secret_basic", "none")
DEFAULT_AUTH_METHOD = "client_secret_basic"


def _error(error: str, description: str, status: int = 400) -> JsonResponse:
    return JsonResponse({"error": error, "error_description": description}, status=status)


def _metadata(request: HttpRequest) -> dict[str, Any] | None:
    try:
        data = json.loads(request.body)
    except (ValueError, RecursionError):  # not JSON, not UTF-8, or absurdly nested
        return None
    return data if isinstance(data, dict) else None


def metadata_problem(data: dict[str, Any]) -> JsonResponse | None:
    """The RFC 7591 error for client metadata this server will not register, or None."""
    problem = redirect_uris_problem(data.get("redirect_uris", []))
    if problem:
        return _error("invalid_redirect_uri", problem)
    # django-oauth-toolkit stores whatever it is given: null would fail the NOT NULL
    # column (a 500), and a number or a list would become a name nobody chose.
    if not isinstance(data.get("client_name", ""), str):
        return _error("invalid_client_metadata", "client_name must be a string.")
    grant_types = data.get("grant_types", ["authorization_code"])
    if not isinstance(grant_types, list) or not all(
        isinstance(grant, str) and grant in SUPPORTED_GRANT_TYPES for grant in grant_types
    ):
        return _error(
            "invalid_client_metadata",
            "grant_types may only contain authorization_code and refresh_token.",
        )
    if "authorization_code" not in grant_types:
        return _error("invalid_client_metadata", "grant_types must include authorization_code.")
    response_types = data.get("response_types", ["code"])
    if response_types != ["code"]:
        return _error("invalid_client_metadata", 'response_types must be ["code"].')
    method = data.get("token_endpoint_auth_method", DEFAULT_AUTH_METHOD)
    if method not in SUPPORTED_AUTH_METHODS:
        return _error(
            "invalid_client_metadata",
            f"token_endpoint_auth_method must be one of {', '.join(SUPPORTED_AUTH_METHODS)}.",
        )
    return None


def _registrable_metadata(request: HttpRequest) -> dict[str, Any] | JsonResponse:
    """The client metadata a registration request sends, or the error that refuses it."""
    data = _metadata(request)
    if data is None:
        return _error("invalid_client_metadata", "The request body must be a JSON object.")
    return metadata_problem(data) or data


def _public_url(path: str) -> str:
    return f"{settings.TAPROOT_PUBLIC_URL}{path}"


def _throttled(request: HttpRequest) -> JsonResponse | None:
    address = throttle.client_ip(request)
    verdict = throttle.hit(
        "register",
        address,
        limit=settings.TAPROOT_REGISTRATION_LIMIT,
        window=settings.TAPROOT_REGISTRATION_WINDOW_SECONDS,
    )
    if verdict.allowed:
        return None
    logger.warning("registration throttled for %s", address)
    minutes = max(1, round(verdict.retry_after / 60))
    response = _error(
        "too_many_requests",
        f"Too many client registrations from this address. Try again in about {minutes} "
        f"minute{'s' if minutes != 1 else ''}.",
        status=429,
    )
    response["Retry-After"] = str(verdict.retry_after)
    return response


# oauth2_provider ships no type information.
class RegistrationView(DynamicClientRegistrationView):  # type: ignore[misc]
    """POST /o/register/: RFC 7591 registration with the allowlist, throttle and echo."""

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        refusal = _throttled(request)
        if refusal:
            return refusal
        data = _registrable_metadata(request)
        if isinstance(data, JsonResponse):
            return data
        response: HttpResponse = super().post(request, *args, **kwargs)
        if response.status_code != 201:
            return response
        body = json.loads(response.content)
        application = (
            get_application_model().objects.only("created").get(client_id=body["client_id"])
        )
        body["token_endpoint_auth_method"] = data.get(
            "token_endpoint_auth_method", DEFAULT_AUTH_METHOD
        )
        body["response_types"] = ["code"]
        body["client_id_issued_at"] = int(application.created.timestamp())
        if "client_secret" in body:
            body["client_secret_expires_at"] = 0
        body["registration_client_uri"] = _public_url(
            reverse("oauth2_provider:dcr-register-management", args=[body["client_id"]])
        )
        return JsonResponse(body, status=201)


def _with_public_registration_uri(response: HttpResponse) -> HttpResponse:
    """django-oauth-toolkit builds `registration_client_uri` from the request's host; use
    TAPROOT_PUBLIC_URL instead, as everywhere else."""
    if response.status_code != 200:
        return response
    body = json.loads(response.content)
    body["registration_client_uri"] = _public_url(
        reverse("oauth2_provider:dcr-register-management", args=[body["client_id"]])
    )
    return JsonResponse(body)


# oauth2_provider ships no type information.
class RegistrationManagementView(DynamicClientRegistrationManagementView):  # type: ignore[misc]
    """RFC 7592 read/update/delete; an update must pass the same checks as registration."""

    def get(self, request: HttpRequest, client_id: str, *args: Any, **kwargs: Any) -> HttpResponse:
        return _with_public_registration_uri(super().get(request, client_id, *args, **kwargs))

    def put(self, request: HttpRequest, client_id: str, *args: Any, **kwargs: Any) -> HttpResponse:
        auth = self._authenticate_registration_request(request, client_id)
        if isinstance(auth, HttpResponse):
            return auth
        data = _registrable_metadata(request)
        if isinstance(data, JsonResponse):
            return data
        return _with_public_registration_uri(super().put(request, client_id, *args, **kwargs))


class RedirectAllowlistPermission:
    """DCR_REGISTRATION_PERMISSION_CLASSES entry: allowlisted redirect URIs only.

    RegistrationView refuses other requests earlier with a precise error; this keeps
    django-oauth-toolkit's own view closed too, should it ever be mounted directly.
    """

    def has_permission(self, request: HttpRequest) -> bool:
        data = _metadata(request)
        return data is not None and redirect_uris_problem(data.get("redirect_uris", [])) is None
