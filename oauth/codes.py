"""An authorization code presented twice is refused, and what it gave is revoked.

RFC 6749 §4.1.2: "If an authorization code is used more than once, the authorization
server MUST deny the request and SHOULD revoke (when possible) all tokens previously
issued based on that authorization code." django-oauth-toolkit refuses the second
presentation (it deletes the grant on exchange) but cannot revoke: nothing links a token
to its code. The token endpoint therefore records each exchange (ExchangedCode) in the
transaction that saves the tokens, and a later presentation of the same code by the same
client revokes the access token and the whole refresh-token family it started.
Exchanges of one code that race each other end the same way, wherever they meet: at most
one gets tokens, and they are revoked.
"""

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.db import transaction
from django.http import HttpRequest, HttpResponse, JsonResponse
from oauth2_provider import views as oauth2_views
from oauth2_provider.models import (
    get_access_token_model,
    get_grant_model,
    get_refresh_token_model,
)
from oauthlib.oauth2.rfc6749.errors import InvalidGrantError

from oauth.models import ExchangedCode
from oauth.tokens import token_checksum

logger = logging.getLogger("taproot.oauth")


# What oauthlib sends with every token endpoint reply, besides its JSON content type.
NO_STORE = {"Cache-Control": "no-store", "Pragma": "no-cache"}


class CodeReplayed(Exception):
    """The code being exchanged has been exchanged before."""


# oauthlib ships no type information.
class ReplayedCodeError(InvalidGrantError):  # type: ignore[misc]
    """invalid_grant for a code another exchange got first, found while saving the tokens.

    oauthlib adds its JSON headers only to errors raised while it validates a request;
    this one is raised later, so it carries them itself.
    """

    @property
    def headers(self) -> dict[str, str]:
        return {"Content-Type": "application/json", **NO_STORE}


@contextmanager
def grant_still_there(request: Any) -> Iterator[None]:
    """Answer invalid_grant, and revoke, when the code's grant disappears mid-request
    because another exchange of the code finished first."""
    try:
        yield
    except get_grant_model().DoesNotExist:
        revoke_what_it_gave(request.code, request.client)
        raise InvalidGrantError(request=request) from None


def already_exchanged(code: str, application: Any) -> bool:
    return ExchangedCode.objects.filter(
        code_checksum=token_checksum(code), application=application
    ).exists()


def record_exchange(code: str, application: Any, token: dict[str, Any]) -> None:
    """Remember that `code` gave `token` (its access and refresh token); call it inside the
    transaction that saved them, so a code is never used without its record."""
    access_token = (
        get_access_token_model()
        .objects.filter(token_checksum=token_checksum(token["access_token"]))
        .first()
    )
    refresh_token = (
        get_refresh_token_model()
        .objects.filter(token_checksum=token_checksum(token["refresh_token"]), revoked__isnull=True)
        .first()
        if token.get("refresh_token")
        else None
    )
    ExchangedCode.objects.create(
        code_checksum=token_checksum(code),
        application=application,
        access_token=access_token,
        token_family=refresh_token.token_family if refresh_token else None,
    )


def revoke_what_it_gave(code: str, application: Any) -> bool:
    """Revoke every token that descends from `code`; False when it was never exchanged."""
    with transaction.atomic():
        exchanged = (
            ExchangedCode.objects.select_for_update()
            .filter(code_checksum=token_checksum(code), application=application)
            .first()
        )
        if exchanged is None:
            return False
        get_refresh_token_model().revoke_family(exchanged.token_family)
        if exchanged.access_token_id is not None:
            get_access_token_model().objects.filter(pk=exchanged.access_token_id).delete()
    logger.warning(
        "authorization code presented twice by client %s: the tokens it gave are revoked",
        application.client_id,
    )
    return True


class TokenView(oauth2_views.TokenView):  # type: ignore[misc]
    """django-oauth-toolkit's token endpoint. Between saving an exchange's tokens and
    answering, it reads the access token back; a replay of the code racing the exchange
    may have revoked it by then, and the answer is invalid_grant instead of a server error.
    """

    def authorization_flow_token_response(
        self, request: HttpRequest, *args: Any, **kwargs: Any
    ) -> HttpResponse:
        try:
            response: HttpResponse = super().authorization_flow_token_response(
                request, *args, **kwargs
            )
        except get_access_token_model().DoesNotExist:
            return JsonResponse({"error": "invalid_grant"}, status=400, headers=NO_STORE)
        return response
