"""The authorization endpoint: django-oauth-toolkit's consent view with Taproot's rules.

Before the consent page is shown the request must use PKCE with S256 and name no
resource other than /mcp (none means /mcp). The page itself shows the client's name, the
host the browser will be sent back to and the resource. Every redirect back to the
client, errors included, carries the RFC 9207 `iss` parameter.
"""

import re
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from django.http import HttpRequest, HttpResponse
from oauth2_provider import views as oauth2_views
from oauth2_provider.exceptions import OAuthToolkitError
from oauth2_provider.models import get_application_model
from oauth2_provider.settings import oauth2_settings
from oauthlib.oauth2.rfc6749.errors import (
    CustomOAuth2Error,
    FatalClientError,
    InvalidRequestError,
)

from oauth import cimd
from oauth.resource import ForeignResource, bind_to_mcp

# BASE64URL(SHA256(verifier)) without padding is always 43 characters (RFC 7636 §4.2).
S256_CHALLENGE = re.compile(r"[A-Za-z0-9_-]{43}")


def with_issuer(uri: str, issuer: str) -> str:
    """`uri` with exactly one `iss` query parameter, set to `issuer` (RFC 9207)."""
    parts = urlsplit(uri)
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != "iss"]
    query.append(("iss", issuer))
    return urlunsplit(parts._replace(query=urlencode(query)))


# oauth2_provider ships no type information.
class AuthorizationView(oauth2_views.AuthorizationView):  # type: ignore[misc]
    def validate_authorization_request(self, request: HttpRequest) -> tuple[Any, dict[str, Any]]:
        scopes, credentials = super().validate_authorization_request(request)
        state = credentials.get("state")
        redirect_uri = credentials["redirect_uri"]
        # oauthlib reads a challenge without a method as "plain".
        if credentials.get("code_challenge_method") != "S256":
            raise OAuthToolkitError(
                error=InvalidRequestError(
                    description='PKCE is required with code_challenge_method "S256".',
                    state=state,
                ),
                redirect_uri=redirect_uri,
            )
        # Any other challenge could never match a verifier: refuse it now rather than
        # hand out a code the token endpoint will turn down.
        if not S256_CHALLENGE.fullmatch(credentials.get("code_challenge") or ""):
            raise OAuthToolkitError(
                error=InvalidRequestError(
                    description="code_challenge must be the 43-character base64url "
                    "SHA-256 of the code verifier (RFC 7636).",
                    state=state,
                ),
                redirect_uri=redirect_uri,
            )
        try:
            resource = bind_to_mcp(request.GET.getlist("resource"))
        except ForeignResource as exc:
            raise OAuthToolkitError(
                error=CustomOAuth2Error(error="invalid_target", description=str(exc), state=state),
                redirect_uri=redirect_uri,
            ) from exc
        query = request.GET.copy()
        query.setlist("resource", resource)
        # Consent is asked every time: no silent re-approval through approval_prompt=auto.
        query.pop("approval_prompt", None)
        # The stubs type GET as immutable, but any QueryDict will do (Django's own
        # HttpRequest starts with a mutable one).
        request.GET = query  # type: ignore[assignment]
        return scopes, credentials

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context: dict[str, Any] = super().get_context_data(**kwargs)
        redirect_uri = context.get("redirect_uri") or ""
        context["redirect_host"] = urlsplit(redirect_uri).netloc or redirect_uri
        application = context.get("application")
        if application is not None and cimd.is_document_id(application.client_id):
            # A client named by its description's address: where that lives is who it is.
            context["described_at"] = cimd.document_host(application.client_id)
        return context

    def error_response(self, error: Any, application: Any, **kwargs: Any) -> HttpResponse:
        client_id = self.request.GET.get("client_id") or ""
        oauth_error = error.oauthlib_error
        # Fatal ones are shown on the page, never sent to a redirect no one vouched for.
        if cimd.is_document_id(client_id) and isinstance(oauth_error, FatalClientError):
            host = cimd.document_host(client_id)
            why = cimd.refusal_of(client_id)
            if why is not None:
                oauth_error.description = (
                    f"The app's description at {host} cannot be used: {why}. Nothing was "
                    "connected; the app's makers must fix it."
                )
            elif "redirect" in (oauth_error.description or "").lower():
                oauth_error.description = (
                    "The address the app wants to send you back to is not one its "
                    f"description at {host} lists. Nothing was connected."
                )
        response: HttpResponse = super().error_response(error, application, **kwargs)
        return response

    def form_valid(self, form: Any) -> HttpResponse:
        application_model = get_application_model()
        if not application_model.objects.filter(client_id=form.cleaned_data["client_id"]).exists():
            refusal: HttpResponse = self.render_to_response(
                {
                    "error": CustomOAuth2Error(
                        error="invalid_client", description="This client is not registered here."
                    )
                },
                status=400,
            )
            return refusal
        response: HttpResponse = super().form_valid(form)
        return response

    def redirect(self, redirect_to: str, application: Any) -> HttpResponse:
        if oauth2_settings.COMPLIANT_BCP_RFC9700_AUTHZ_RESPONSE_ISS:
            redirect_to = with_issuer(
                redirect_to, oauth2_settings.oauth2_authorization_server_issuer(self.request)
            )
        response: HttpResponse = super().redirect(redirect_to, application)
        return response
