"""The bearer-token lookup of every /mcp request, both ways.

mcp_bridge.auth reads a token with one statement written out (`stored_token`); the ORM
equivalent is the query django-oauth-toolkit makes for its own resource servers
(`OAuth2Validator._load_access_token`), then the user's last reflect and close as
memories.services.last_loads reads them. `orm_stored_token` makes those queries and gives
the answer in the same shape: bench.service_bench times the two side by side, and
tests/mcp/test_auth.py holds them equal.
"""

from collections.abc import Callable
from typing import Any

from oauth2_provider.models import get_access_token_model

from mcp_bridge.auth import StoredToken, stored_token
from memories.services import last_loads
from oauth.tokens import issue_access_token, token_checksum


def orm_stored_token(checksum: str) -> StoredToken | None:
    """`stored_token(checksum)` through django-oauth-toolkit's own query."""
    token = (
        get_access_token_model()
        .objects.select_related("application", "user")
        .filter(token_checksum=checksum)
        .first()
    )
    if token is None or token.user is None:
        return None
    application = token.application
    return StoredToken(
        expires=token.expires,
        scope=token.scope,
        resource=token.resource,
        application_id=token.application_id,
        client_id=application.client_id if application else "",
        client_name=application.name if application else "",
        user=token.user,
        loads=last_loads(token.user),
    )


def timed_lookups(owner: Any) -> tuple[Callable[[int], object], Callable[[int], object]]:
    """A fresh token of the owner's, and its lookup by checksum: written out, then by the
    ORM (as bench operations, which take the run number)."""
    raw, _ = issue_access_token(owner, days=1)
    checksum = token_checksum(raw)
    return (lambda i: stored_token(checksum)), (lambda i: orm_stored_token(checksum))
