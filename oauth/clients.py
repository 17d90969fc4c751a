"""The OAuth clients acting for a user: what they hold, and taking it back.

django-oauth-toolkit owns these models; nothing in `memories` is involved.
"""

from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import Count, IntegerField, Max, OuterRef, Q, QuerySet, Subquery, Value
from django.db.models.functions import Coalesce
from django.utils import timezone
from oauth2_provider.models import (
    get_access_token_model,
    get_application_model,
    get_grant_model,
    get_refresh_token_model,
)


def _count(queryset: Any) -> Coalesce:
    counted = queryset.order_by().values("application").annotate(n=Count("pk")).values("n")
    return Coalesce(Subquery(counted, output_field=IntegerField()), Value(0))


def _latest(queryset: Any, field: str) -> Subquery:
    latest = queryset.order_by().values("application").annotate(m=Max(field)).values("m")
    return Subquery(latest)


def connected_applications(user: Any, *, now: datetime | None = None) -> QuerySet[Any]:
    """Applications holding a live access token or an unrevoked refresh token for this user,
    the most recently issued to first. Each carries how many of either it holds
    (`live_access`, `live_refresh`), when its latest access token was issued
    (`last_issued`) and when the last to expire does (`access_expires`)."""
    now = now or timezone.now()
    access = get_access_token_model().objects.filter(
        user=user, application=OuterRef("pk"), expires__gt=now
    )
    refresh = get_refresh_token_model().objects.filter(
        user=user, application=OuterRef("pk"), revoked__isnull=True
    )
    applications: QuerySet[Any] = (
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
    return applications


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
