"""Bearer tokens for /mcp: django-oauth-toolkit's access tokens, checked for this resource.

django-oauth-toolkit stores tokens hashed (only the sha256 checksum is kept), treats a
token without `resource` as valid anywhere, matches resources by prefix, and keeps its
registration tokens in the same table. /mcp accepts none of that: only a live token of
an active user whose `resource` names this server's /mcp URL exactly.

A raw SQL fast path: every /mcp request reads its token with one statement written out
(`stored_token`). The ORM equivalent is the query django-oauth-toolkit makes itself,
`AccessToken.objects.select_related("application", "user").filter(token_checksum=…)
.first()` (bench/token_lookup.py runs it). Building that query and its three models
costs one to two milliseconds more per request than the statement (docs/benchmarks.md,
"The bearer-token lookup, both ways"), and tests/mcp/test_auth.py
(test_the_written_out_token_lookup_reads_what_django_oauth_toolkits_query_reads) holds
the two to the same values for every kind of token the table holds.
"""

import contextvars
import functools
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.db.models import Field, Model
from django.db.models.expressions import Col
from django.utils import timezone
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken, TokenVerifier
from mcp.server.auth.settings import AuthSettings
from oauth2_provider.models import get_access_token_model, get_application_model
from pydantic import AnyHttpUrl, PrivateAttr

from mcp_bridge.activity import note_refusal
from mcp_bridge.database import run_sync
from memories.models import Closing, ReflectCall
from memories.services import LastLoads
from oauth.models import RefusalReason
from oauth.resource import MCP_SCOPE, is_mcp_resource, mcp_resource_url
from oauth.tokens import token_checksum

CLIENT_NAME_CLAIM = "taproot_client_name"
# Far longer than any token django-oauth-toolkit issues; anything longer is not ours.
MAX_TOKEN_LENGTH = 512


def is_for_this_server(resources: Any) -> bool:
    """True when the token's RFC 8707 resource list names this server's /mcp URL exactly."""
    return isinstance(resources, list) and any(is_mcp_resource(r) for r in resources)


class UserAccessToken(AccessToken):
    """The SDK's access token, carrying the user it was checked for, so that a tool call
    acts for that user without looking them up again."""

    _user: Any = PrivateAttr(default=None)
    _loads: LastLoads | None = PrivateAttr(default=None)
    _application_id: int | None = PrivateAttr(default=None)

    @classmethod
    def acting_for(
        cls,
        user: Any,
        loads: LastLoads | None = None,
        application_id: int | None = None,
        **fields: Any,
    ) -> "UserAccessToken":
        token = cls(**fields)
        token._user = user
        token._loads = loads
        token._application_id = application_id
        return token

    @property
    def application_id(self) -> int | None:
        """The OAuth client's primary key (None for a token issued to no client)."""
        return self._application_id

    @property
    def user(self) -> Any:
        return self._user

    @property
    def loads(self) -> LastLoads | None:
        return self._loads


# The token's fields read for the check, then every column of its user.
TOKEN_FIELDS = ("expires", "scope", "resource", "application")


# Read with the token: when its user last loaded the memory and last closed a
# conversation, so remember and recall know whether a reflect is due without a query.
_LAST_LOADS = ((ReflectCall, "called_at"), (Closing, "created_at"))


@functools.cache
def _lookup_sql(vendor: str) -> str:
    """One statement: the token by its indexed checksum, its client's id and name, its
    user, and the user's last reflect and close (each the last entry of an index).

    Written out rather than built by the ORM on every request, where building and
    instantiating three models cost more than the query itself; the values pass through
    each field's own converters, as the ORM would pass them.
    """
    quote = connection.ops.quote_name
    token_model, user_model = get_access_token_model(), get_user_model()
    client_model = get_application_model()

    def column(model: type[Model], name: str) -> str:
        field = model._meta.get_field(name)
        if not isinstance(field, Field) or not field.column:
            raise TypeError(f"{model.__name__}.{name} is not a column")
        return quote(field.column)

    columns = [f"t.{column(token_model, name)}" for name in TOKEN_FIELDS]
    columns.append(f"a.{column(client_model, 'client_id')}")
    columns.append(f"a.{column(client_model, 'name')}")
    columns += [f"u.{column(user_model, field.name)}" for field in user_model._meta.concrete_fields]
    user_pk = f"u.{column(user_model, user_model._meta.pk.name)}"
    columns += [
        f"(SELECT max(x.{column(model, name)}) FROM {quote(model._meta.db_table)} x"
        f" WHERE x.{column(model, 'owner')} = {user_pk})"
        for model, name in _LAST_LOADS
    ]
    return (
        f"SELECT {', '.join(columns)} FROM {quote(token_model._meta.db_table)} t"
        f" INNER JOIN {quote(user_model._meta.db_table)} u"
        f" ON u.{column(user_model, user_model._meta.pk.name)} = t.{column(token_model, 'user')}"
        f" LEFT OUTER JOIN {quote(client_model._meta.db_table)} a"
        f" ON a.{column(client_model, client_model._meta.pk.name)}"
        f" = t.{column(token_model, 'application')}"
        f" WHERE t.{column(token_model, 'token_checksum')} = %s"
    )


Converter = Callable[[Any, Any, Any], Any]
# Per thread: (its database connection, the converters of each column of the lookup).
_converters = threading.local()


def _column_converters() -> list[tuple[Col, list[Converter]]]:
    """What the ORM would pass each column's value through, for this thread's
    connection (the backend's converters are bound to it)."""
    database = connections[DEFAULT_DB_ALIAS]
    cached: tuple[object, list[tuple[Col, list[Converter]]]] | None = getattr(
        _converters, "value", None
    )
    if cached is not None and cached[0] is database:
        return cached[1]
    token_meta = get_access_token_model()._meta
    fields = [token_meta.get_field(name) for name in TOKEN_FIELDS]
    fields.append(get_application_model()._meta.get_field("client_id"))
    fields.append(get_application_model()._meta.get_field("name"))
    fields += get_user_model()._meta.concrete_fields
    fields += [model._meta.get_field(name) for model, name in _LAST_LOADS]
    columns = [field.get_col("t") for field in fields if isinstance(field, Field)]
    found = [
        (column, [*database.ops.get_db_converters(column), *column.get_db_converters(database)])
        for column in columns
    ]
    _converters.value = (database, found)
    return found


@dataclass(frozen=True)
class StoredToken:
    expires: datetime | None
    scope: str
    resource: Any
    application_id: int | None
    client_id: str
    client_name: str
    user: Any
    loads: LastLoads


def stored_token(checksum: str) -> StoredToken | None:
    """The stored access token with this checksum and its user (None for a token that
    has no user, such as a registration token)."""
    with connection.cursor() as cursor:
        cursor.execute(_lookup_sql(connection.vendor), [checksum])
        row = cursor.fetchone()
    if row is None:
        return None
    values = []
    for value, (column, converters) in zip(row, _column_converters(), strict=True):
        for convert in converters:
            value = convert(value, column, connection)
        values.append(value)
    expires, scope, resource, application_id, client_id, client_name = values[
        : len(TOKEN_FIELDS) + 2
    ]
    user_model = get_user_model()
    names = [field.attname for field in user_model._meta.concrete_fields]
    user_values = values[len(TOKEN_FIELDS) + 2 : -len(_LAST_LOADS)]
    user = user_model.from_db(connection.alias, names, user_values)
    loads = LastLoads(*values[-len(_LAST_LOADS) :])
    return StoredToken(
        expires, scope, resource, application_id, client_id or "", client_name or "", user, loads
    )


def find_access_token(raw_token: str) -> UserAccessToken | None:
    """The SDK's view of a raw bearer token, or None when /mcp must refuse it.

    One query, by the token's indexed checksum, with its user and client joined in.
    """
    if not raw_token or len(raw_token) > MAX_TOKEN_LENGTH or not raw_token.isprintable():
        return None
    token = stored_token(token_checksum(raw_token))
    # Registration tokens have no user (the lookup leaves them out) and no resource.
    if token is None or token.expires is None:
        return None
    if (refused := _refusal(token)) is not None:
        # Shown to the token's owner on the clients page: the token still names them.
        note_refusal(user_id=token.user.pk, application_id=token.application_id, reason=refused)
        return None
    return UserAccessToken.acting_for(
        token.user,
        token.loads,
        token.application_id,
        token=raw_token,
        client_id=token.client_id,
        scopes=token.scope.split(),
        expires_at=int(token.expires.timestamp()),
        resource=mcp_resource_url(),
        subject=str(token.user.pk),
        # The client's name rides along for the reflect record (no second lookup).
        claims={"iss": settings.TAPROOT_PUBLIC_URL, CLIENT_NAME_CLAIM: token.client_name},
    )


def _refusal(token: StoredToken) -> RefusalReason | None:
    """Why /mcp refuses this stored token, or None when it does not."""
    if token.expires is not None and timezone.now() >= token.expires:
        return RefusalReason.EXPIRED
    if not token.user.is_active:
        return RefusalReason.INACTIVE
    if not is_for_this_server(token.resource):
        return RefusalReason.WRONG_RESOURCE
    return None


# RFC 6750 §2.1: the scheme in any case, one or more spaces, a token68. ASCII only (bytes).
_BEARER_CREDENTIALS = re.compile(rb"(?i:bearer) +([A-Za-z0-9\-._~+/]+=*)")


def bearer_credentials(authorization: bytes | None) -> str | None:
    """The token of an `Authorization: Bearer <token>` header, however the scheme is
    spelled ("Bearer", "bearer", several spaces); None when there is no header or it is
    not a bearer token of the right shape (one no token of ours could match)."""
    if authorization is None:
        return None
    found = _BEARER_CREDENTIALS.fullmatch(authorization)
    if found is None or len(found[1]) > MAX_TOKEN_LENGTH:
        return None
    return found[1].decode("ascii")


# The outcome of the current request's token lookup: (raw token, what it verified to).
_checked: contextvars.ContextVar[tuple[str, UserAccessToken | None] | None] = (
    contextvars.ContextVar("taproot_checked_token", default=None)
)


async def check_token(raw_token: str) -> UserAccessToken | None:
    """Look the token up (one query on a database thread) for the rest of this request:
    the SDK's bearer middleware is then told the outcome instead of asking again."""
    return await run_sync(find_access_token, raw_token)


@contextmanager
def checked_token(raw_token: str, access: UserAccessToken | None) -> Iterator[None]:
    """Within the block, the SDK's verifier answers for `raw_token` with `access`.

    Only for the one request: every request looks its token up afresh, so a token revoked
    a moment ago is refused on the very next request.
    """
    reset = _checked.set((raw_token, access))
    try:
        yield
    finally:
        _checked.reset(reset)


class DjangoTokenVerifier(TokenVerifier):
    async def verify_token(self, token: str) -> AccessToken | None:
        checked = _checked.get()
        if checked is not None and checked[0] == token:
            return checked[1]
        # Outside Taproot's ASGI wrapper (which checks the token first): look it up here.
        return await check_token(token)


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
    """The active user the current request's token acts for, as read with the token at
    the start of this request."""
    token = get_access_token()
    if not isinstance(token, UserAccessToken) or token.user is None:
        raise NotAuthenticated("no verified access token in this request")
    return token.user


def token_client() -> tuple[str, str]:
    """The OAuth client (client id, name) the current request's token was issued to."""
    token = get_access_token()
    if token is None:
        return "", ""
    name = (token.claims or {}).get(CLIENT_NAME_CLAIM, "")
    return token.client_id, name if isinstance(name, str) else ""


def token_caller() -> tuple[int, int] | None:
    """Who the current request's token acts for and through which OAuth client (their
    primary keys), or None for a token issued to no client."""
    token = get_access_token()
    if not isinstance(token, UserAccessToken) or token.user is None:
        return None
    if token.application_id is None:
        return None
    return token.user.pk, token.application_id


def token_loads(owner: Any) -> LastLoads | None:
    """The owner's last reflect and close as read with the current request's token (None
    outside a /mcp request, or for another user)."""
    token = get_access_token()
    if not isinstance(token, UserAccessToken) or token.user is None:
        return None
    return token.loads if token.user.pk == owner.pk else None
