"""Bearer tokens written straight into django-oauth-toolkit's tables, for tests.

Tokens are stored hashed (only the checksum), exactly as the toolkit stores the ones
it issues, so the verifier under test sees real rows. Shared with the OAuth tests.
"""

import secrets
from datetime import timedelta
from typing import Any

from django.utils import timezone
from oauth2_provider.models import (
    get_access_token_model,
    get_application_model,
    set_token_value,
)


def make_application(*, name: str = "Test client", user: Any = None, **overrides: Any) -> Any:
    """A registered client. Its secret is kept unhashed unless asked: these tests never
    present it."""
    Application = get_application_model()
    values: dict[str, Any] = {
        "name": name,
        "user": user,
        "client_type": Application.CLIENT_CONFIDENTIAL,
        "authorization_grant_type": Application.GRANT_AUTHORIZATION_CODE,
        "redirect_uris": "https://claude.ai/api/mcp/auth_callback",
        "hash_client_secret": False,
    }
    values.update(overrides)
    return Application.objects.create(**values)


def make_access_token(
    user: Any,
    *,
    resource: str | list[str] | None,
    expires_in: timedelta = timedelta(hours=1),
    scope: str = "mcp",
    application: Any = None,
) -> str:
    """A stored access token; returns the raw value (the row keeps only its checksum).

    `resource` is the RFC 8707 audience: a URL, a list of them, or None for none.
    """
    raw = secrets.token_urlsafe(32)
    if resource is None:
        resources: list[str] = []
    elif isinstance(resource, str):
        resources = [resource]
    else:
        resources = list(resource)
    token = get_access_token_model()(
        user=user,
        application=application or make_application(),
        expires=timezone.now() + expires_in,
        scope=scope,
        resource=resources,
    )
    set_token_value(token, raw)
    token.save()
    return raw


def make_registration_token(application: Any = None) -> str:
    """What django-oauth-toolkit's dynamic client registration hands a client: a token
    with no user, no resource, the registration scope and an expiry in year 9999."""
    raw = secrets.token_urlsafe(32)
    token = get_access_token_model()(
        user=None,
        application=application or make_application(name="Registered client"),
        expires=timezone.now().replace(year=9999),
        scope="oauth2_provider:registration",
    )
    set_token_value(token, raw)
    token.save()
    return raw


def revoke_access_token(raw: str) -> None:
    from mcp_bridge.auth import token_checksum

    get_access_token_model().objects.get(token_checksum=token_checksum(raw)).revoke()
