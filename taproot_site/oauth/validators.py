"""django-oauth-toolkit's request validator, with every grant and token bound to /mcp."""

from typing import Any

from django.conf import settings
from oauth2_provider.oauth2_validators import OAuth2Validator
from oauthlib.common import Request
from oauthlib.oauth2.rfc6749.errors import CustomOAuth2Error

from taproot_site.oauth.redirects import is_loopback_http
from taproot_site.oauth.resource import ForeignResource, bind_to_mcp


def invalid_target(exc: ForeignResource, request: Request) -> CustomOAuth2Error:
    return CustomOAuth2Error(error="invalid_target", description=str(exc), request=request)


def requested_resources(request: Request) -> list[object]:
    """Every `resource` value of a token request (RFC 8707 allows repeating it)."""
    resource = getattr(request, "resource", None)
    if isinstance(resource, list):
        return resource
    if isinstance(resource, str):
        # oauthlib keeps only the last of repeated body parameters.
        repeated = [
            value
            for key, value in (getattr(request, "decoded_body", None) or [])
            if key == "resource"
        ]
        if len(repeated) > 1:
            return repeated
        return [resource] if resource.strip() else []
    return []


# oauth2_provider ships no type information.
class TaprootOAuth2Validator(OAuth2Validator):  # type: ignore[misc]
    def validate_redirect_uri(
        self, client_id: str, redirect_uri: str, request: Request, *args: Any, **kwargs: Any
    ) -> bool:
        # A client registered while loopback clients were on cannot use its loopback
        # callback once they are turned off.
        if is_loopback_http(redirect_uri) and not settings.TAPROOT_ALLOW_LOOPBACK_CLIENTS:
            return False
        valid: bool = super().validate_redirect_uri(
            client_id, redirect_uri, request, *args, **kwargs
        )
        return valid

    def _create_authorization_code(
        self, request: Request, code: dict[str, Any], expires: Any = None
    ) -> Any:
        # The consent form's hidden `resource` field can be edited (or emptied, and then
        # oauthlib falls back to the query string); check it again here.
        try:
            request.resource = bind_to_mcp(requested_resources(request))
        except ForeignResource as exc:
            raise invalid_target(exc, request) from exc
        return super()._create_authorization_code(request, code, expires)

    def _bind_requested_resource(self, request: Request) -> None:
        # A token request's resource must be /mcp (a trailing slash is forgiven). Checked
        # while the request is validated, so the refusal is a proper OAuth error reply.
        requested = requested_resources(request)
        if requested:
            try:
                request.resource = bind_to_mcp(requested)
            except ForeignResource as exc:
                raise invalid_target(exc, request) from exc

    def validate_code(
        self, client_id: str, code: str, client: Any, request: Request, *args: Any, **kwargs: Any
    ) -> bool:
        if not super().validate_code(client_id, code, client, request, *args, **kwargs):
            return False
        self._bind_requested_resource(request)
        return True

    def validate_refresh_token(
        self, refresh_token: str, client: Any, request: Request, *args: Any, **kwargs: Any
    ) -> bool:
        if not super().validate_refresh_token(refresh_token, client, request, *args, **kwargs):
            return False
        self._bind_requested_resource(request)
        return True

    def _check_and_set_request_resource(self, request: Request) -> None:
        # Last line: whatever the token inherits from its grant or refresh token must be
        # /mcp too (rows written before these rules, for instance).
        super()._check_and_set_request_resource(request)
        try:
            request.resource = bind_to_mcp(request.resource)
        except ForeignResource as exc:
            raise invalid_target(exc, request) from exc
