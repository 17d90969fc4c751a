"""Removing dynamically registered clients nobody uses any more.

Claude registers a new client on every fresh connection, so registrations pile up. A
registered client is stale once it is older than the cut-off and holds nothing live: no
unexpired authorization code, no unexpired access token (the registration-management
token django-oauth-toolkit keeps in the same table does not count) and no refresh token
that could still be exchanged.
"""

from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import Exists, Model, OuterRef, Q, QuerySet
from django.utils import timezone
from oauth2_provider.models import (
    get_access_token_model,
    get_application_model,
    get_grant_model,
    get_refresh_token_model,
    refresh_token_expire_timedelta,
)
from oauth2_provider.settings import oauth2_settings


def live_refresh_tokens(now: datetime) -> QuerySet[Model]:
    """Refresh tokens the token endpoint would still accept (its own rules, as a query)."""
    tokens: QuerySet[Model] = get_refresh_token_model().objects.filter(
        revoked__isnull=True, access_token__isnull=False
    )
    lifetime = refresh_token_expire_timedelta()
    if lifetime:
        tokens = tokens.filter(access_token__expires__gt=now - lifetime)
    return tokens


def stale_registered_clients(
    *, older_than: timedelta, now: datetime | None = None
) -> QuerySet[Model]:
    now = now or timezone.now()
    application_model = get_application_model()
    live_grant = get_grant_model().objects.filter(application=OuterRef("pk"), expires__gt=now)
    live_access_token = (
        get_access_token_model()
        .objects.filter(application=OuterRef("pk"), expires__gt=now)
        .exclude(scope=oauth2_settings.DCR_REGISTRATION_SCOPE)
    )
    live_refresh_token = live_refresh_tokens(now).filter(application=OuterRef("pk"))
    stale: QuerySet[Model] = application_model.objects.filter(
        registration_source=application_model.RegistrationSource.DCR,
        created__lt=now - older_than,
    ).exclude(Q(Exists(live_grant)) | Q(Exists(live_access_token)) | Q(Exists(live_refresh_token)))
    return stale


def delete_stale_registered_clients(
    *, older_than: timedelta, now: datetime | None = None, dry_run: bool = False
) -> int:
    """Delete the stale registered clients (with their dead grants and tokens); their number."""
    with transaction.atomic():
        stale = stale_registered_clients(older_than=older_than, now=now)
        ids = list(stale.values_list("pk", flat=True))
        if not dry_run and ids:
            get_application_model().objects.filter(pk__in=ids).delete()
    return len(ids)
