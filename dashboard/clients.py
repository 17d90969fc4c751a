"""The OAuth clients acting for a user: what they hold, and taking it back.

django-oauth-toolkit owns these models; nothing in `memories` is involved.
"""

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from django.db import transaction
from django.db.models import Count, IntegerField, Max, OuterRef, Q, Subquery, Value
from django.db.models.functions import Coalesce
from django.utils import timezone
from oauth2_provider.models import (
    get_access_token_model,
    get_application_model,
    get_grant_model,
    get_refresh_token_model,
)


@dataclass(frozen=True)
class ConnectedClient:
    id: int
    name: str
    client_id: str
    redirect_hosts: list[str]
    registered: datetime
    access_tokens: int
    refresh_tokens: int
    last_issued: datetime | None
    access_expires: datetime | None


def _count(queryset: Any) -> Coalesce:
    counted = queryset.order_by().values("application").annotate(n=Count("pk")).values("n")
    return Coalesce(Subquery(counted, output_field=IntegerField()), Value(0))


def _latest(queryset: Any, field: str) -> Subquery:
    latest = queryset.order_by().values("application").annotate(m=Max(field)).values("m")
    return Subquery(latest)


def _hosts(redirect_uris: str) -> list[str]:
    hosts: list[str] = []
    for uri in redirect_uris.split():
        host = urlsplit(uri).hostname or uri
        if host not in hosts:
            hosts.append(host)
    return hosts


def connected_clients(user: Any, *, now: datetime | None = None) -> list[ConnectedClient]:
    """Applications holding a live access token or an unrevoked refresh token for this user."""
    now = now or timezone.now()
    access = get_access_token_model().objects.filter(
        user=user, application=OuterRef("pk"), expires__gt=now
    )
    refresh = get_refresh_token_model().objects.filter(
        user=user, application=OuterRef("pk"), revoked__isnull=True
    )
    applications = (
        get_application_model()
        .objects.annotate(
            live_access=_count(access),
            live_refresh=_count(refresh),
            last_issued=_latest(access, "created"),
            access_expires=_latest(access, "expires"),
        )
        .filter(Q(live_access__gt=0) | Q(live_refresh__gt=0))
        .order_by("-last_issued", "name", "pk")
    )
    return [
        ConnectedClient(
            id=app.pk,
            name=app.name or "Unnamed client",
            client_id=app.client_id,
            redirect_hosts=_hosts(app.redirect_uris),
            registered=app.created,
            access_tokens=app.live_access,
            refresh_tokens=app.live_refresh,
            last_issued=app.last_issued,
            access_expires=app.access_expires,
        )
        for app in applications
    ]


def revoke_client(user: Any, application_id: int) -> bool:
    """End everything one application holds for this user: tokens and pending grants.

    Other users of the same application keep theirs. False when it held nothing.
    """
    refresh_model = get_refresh_token_model()
    access_model = get_access_token_model()
    grant_model = get_grant_model()
    with transaction.atomic():
        refresh_tokens = list(
            refresh_model.objects.filter(
                user=user, application_id=application_id, revoked__isnull=True
            )
        )
        for token in refresh_tokens:
            token.revoke()
        access_deleted, _ = access_model.objects.filter(
            user=user, application_id=application_id
        ).delete()
        grants_deleted, _ = grant_model.objects.filter(
            user=user, application_id=application_id
        ).delete()
    return bool(refresh_tokens or access_deleted or grants_deleted)
