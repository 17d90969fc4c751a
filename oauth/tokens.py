"""Access tokens: the checksum every token is looked up by, and tokens issued outside the
OAuth flow, for local clients and scripts (`manage.py issue_token`)."""

import hashlib
import secrets
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone
from oauth2_provider.models import (
    get_access_token_model,
    get_application_model,
    set_token_value,
)

from oauth.resource import MCP_SCOPE, mcp_resource_url

LOCAL_APPLICATION_NAME = "Taproot local token"


def token_checksum(raw: str) -> str:
    """The lookup key django-oauth-toolkit stores for a token (sha256 of the raw value);
    ExchangedCode keys authorization codes the same way."""
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()


def local_application(user: Any) -> Any:
    """The user's own application that command-issued tokens belong to (made once)."""
    Application = get_application_model()
    application = Application.objects.filter(user=user, name=LOCAL_APPLICATION_NAME).first()
    if application is None:
        application = Application.objects.create(
            user=user,
            name=LOCAL_APPLICATION_NAME,
            client_type=Application.CLIENT_CONFIDENTIAL,
            authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
            redirect_uris="",
        )
    return application


def issue_access_token(user: Any, *, days: int) -> tuple[str, Any]:
    """A new access token for /mcp acting for `user`; returns (raw token, stored row).

    The raw value exists only here: the database keeps its checksum.
    """
    raw = secrets.token_urlsafe(32)
    with transaction.atomic():
        token = get_access_token_model()(
            user=user,
            application=local_application(user),
            expires=timezone.now() + timedelta(days=days),
            scope=MCP_SCOPE,
            resource=[mcp_resource_url()],
        )
        set_token_value(token, raw)
        token.save()
    return raw, token
