"""Bearer tokens for /mcp: django-oauth-toolkit's access tokens, checked for this resource.

django-oauth-toolkit stores tokens hashed (only the sha256 checksum is kept), treats a
token without `resource` as valid anywhere, matches resources by prefix, and keeps its
registration tokens in the same table. /mcp accepts none of that: only a live token of
an active user whose `resource` names this server's /mcp URL exactly.
"""

import hashlib
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib.auth import get_user_model
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken, TokenVerifier
from mcp.server.auth.settings import AuthSettings
from oauth2_provider.models import get_access_token_model
from pydantic import AnyHttpUrl

MCP_SCOPE = "mcp"
CLIENT_NAME_CLAIM = "taproot_client_name"
# Far longer than any token django-oauth-toolkit issues; anything longer is not ours.
MAX_TOKEN_LENGTH = 512


def normalised_resource(url: str) -> str:
    return url.strip().rstrip("/")


def mcp_resource_url() -> str:
    return normalised_resource(settings.TAPROOT_MCP_URL)


def token_checksum(raw_token: str) -> str:
    """The lookup key django-oauth-toolkit stores for a token (sha256 of the raw value)."""
    return hashlib.sha256(raw_token.encode("utf-8")).hexdigest()


def is_for_this_server(resources: Any) -> bool:
    """True when the token's RFC 8707 resource list names this server's /mcp URL exactly."""
    if not isinstance(resources, list):
        return False
    wanted = mcp_resource_url()
    return any(isinstance(r, str) and normalised_resource(r) == wanted for r in resources)


def find_access_token(raw_token: str) -> AccessToken | None:
    """The SDK's view of a raw bearer token, or None when /mcp must refuse it."""
    if not raw_token or len(raw_token) > MAX_TOKEN_LENGTH or not raw_token.isprintable():
        return None
    token = (
        get_access_token_model()
        .objects.select_related("user", "application")
        .filter(token_checksum=token_checksum(raw_token))
        .first()
    )
    # Registration tokens have no user and no resource, so both checks refuse them.
    if token is None or token.is_expired() or token.user is None or not token.user.is_active:
        return None
    if not is_for_this_server(token.resource):
        return None
    return AccessToken(
        token=raw_token,
        client_id=token.application.client_id if token.application else "",
        scopes=token.scope.split(),
        expires_at=int(token.expires.timestamp()),
        resource=mcp_resource_url(),
        subject=str(token.user_id),
        # The client's name rides along for the reflect record (no second lookup).
        claims={
            "iss": settings.TAPROOT_PUBLIC_URL,
            CLIENT_NAME_CLAIM: token.application.name if token.application else "",
        },
    )


class DjangoTokenVerifier(TokenVerifier):
    async def verify_token(self, token: str) -> AccessToken | None:
        # Thread-sensitive: inside the /mcp request wrapper this is the request's own
        # thread and database connection, closed when the request finishes.
        return await sync_to_async(find_access_token, thread_sensitive=True)(token)


def auth_settings() -> AuthSettings:
    """The SDK's resource-server settings; its 401 challenge points at our metadata."""
    return AuthSettings(
        issuer_url=AnyHttpUrl(settings.TAPROOT_PUBLIC_URL),
        resource_server_url=AnyHttpUrl(mcp_resource_url()),
        required_scopes=[MCP_SCOPE],
        validate_token_resource=True,
    )


class NotAuthenticated(Exception):
    """A tool ran without a verified token (cannot happen behind the SDK's middleware)."""


def token_user() -> Any:
    """The active user the current request's token acts for. Call from a sync thread."""
    token = get_access_token()
    if token is None or token.subject is None:
        raise NotAuthenticated("no verified access token in this request")
    user = get_user_model().objects.filter(pk=token.subject, is_active=True).first()
    if user is None:
        raise NotAuthenticated("the token's user no longer exists or is inactive")
    return user


def token_client() -> tuple[str, str]:
    """The OAuth client (client id, name) the current request's token was issued to."""
    token = get_access_token()
    if token is None:
        return "", ""
    name = (token.claims or {}).get(CLIENT_NAME_CLAIM, "")
    return token.client_id, name if isinstance(name, str) else ""
