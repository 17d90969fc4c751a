"""django-oauth-toolkit's request validator, with every grant and token bound to /mcp and
every authorization code good for one exchange only (see codes.py)."""

from typing import Any

from django.conf import settings
from django.db import IntegrityError
from django.utils import timezone
from oauth2_provider.models import get_grant_model
from oauth2_provider.oauth2_validators import OAuth2Validator
from oauthlib.common import Request
from oauthlib.oauth2.rfc6749.errors import CustomOAuth2Error

from oauth import cimd, codes
from oauth.redirects import is_loopback_http
from oauth.resource import ForeignResource, bind_to_mcp


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
    def _load_application(self, client_id: str, request: Request) -> Any:
        client = super()._load_application(client_id, request)
        if not cimd.loopback_id_allowed(client_id):
            return client  # django-oauth-toolkit resolves https documents itself
        # A loopback http document, for local development: resolved, and fetched again
        # once stale, as django-oauth-toolkit does an https one.
        if client is None or (
            client.cimd_expires_at is not None and timezone.now() > client.cimd_expires_at
        ):
            client = cimd.resolve(client_id, request) or client
        if client is None or not client.is_usable(request):
            return None
        request.client = client
        return client

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
        # No grant (expired, never issued, or exchanged and deleted), or a grant whose
        # exchange has saved its tokens but not yet deleted it: a code exchanged before
        # revokes what that exchange gave.
        valid = super().validate_code(client_id, code, client, request, *args, **kwargs)
        if not valid or codes.already_exchanged(code, client):
            codes.revoke_what_it_gave(code, client)
            return False
        self._bind_requested_resource(request)
        return True

    # django-oauth-toolkit reads the grant again after validate_code has found it, and
    # another exchange of the same code may have deleted it in between.
    def get_code_challenge(self, code: str, request: Request) -> str | None:
        with codes.grant_still_there(request):
            challenge: str | None = super().get_code_challenge(code, request)
        return challenge

    def get_code_challenge_method(self, code: str, request: Request) -> str | None:
        with codes.grant_still_there(request):
            method: str | None = super().get_code_challenge_method(code, request)
        return method

    def confirm_redirect_uri(
        self,
        client_id: str,
        code: str,
        redirect_uri: str,
        client: Any,
        request: Request,
        *args: Any,
        **kwargs: Any,
    ) -> bool:
        with codes.grant_still_there(request):
            allowed: bool = super().confirm_redirect_uri(
                client_id, code, redirect_uri, client, request, *args, **kwargs
            )
        return allowed

    def save_bearer_token(
        self, token: dict[str, Any], request: Request, *args: Any, **kwargs: Any
    ) -> Any:
        # When another exchange of this code got there first, nothing of this one is saved.
        try:
            return super().save_bearer_token(token, request, *args, **kwargs)
        except codes.CodeReplayed:
            codes.revoke_what_it_gave(request.code, request.client)
            raise codes.ReplayedCodeError(request=request) from None
        except IntegrityError:
            # The unique code checksum, should the grant's lock not have held it back.
            if request.grant_type != "authorization_code" or not codes.revoke_what_it_gave(
                request.code, request.client
            ):
                raise
            raise codes.ReplayedCodeError(request=request) from None

    def _save_bearer_token(
        self, token: dict[str, Any], request: Request, *args: Any, **kwargs: Any
    ) -> Any:
        if request.grant_type != "authorization_code":
            return super()._save_bearer_token(token, request, *args, **kwargs)
        # Two exchanges of one code may both have passed validate_code. Locking the grant
        # makes the second wait here until the first has committed its tokens and record,
        # which the second then sees (the unique checksum is the last line).
        grant = (
            get_grant_model()
            .objects.select_for_update()
            .filter(code=request.code, application=request.client)
            .first()
        )
        if grant is None or codes.already_exchanged(request.code, request.client):
            raise codes.CodeReplayed
        saved = super()._save_bearer_token(token, request, *args, **kwargs)
        codes.record_exchange(request.code, request.client, token)
        return saved

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
