"""The connected-clients page's rows: each OAuth client acting for a user, as shown there.

What a client holds, and taking it back, is the oauth app's (oauth.clients).
"""

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from oauth.activity import Call, Refusal, activity
from oauth.clients import connected_applications


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
    calls: list[Call]  # its last calls, the most recent first
    refusal: Refusal | None  # the last time /mcp refused its token, and why

    @property
    def last_called(self) -> datetime | None:
        return self.calls[0].at if self.calls else None

    @property
    def refused_since_last_call(self) -> bool:
        """Whether its token was refused after its last call went through."""
        if self.refusal is None:
            return False
        return self.last_called is None or self.refusal.at > self.last_called


def _hosts(redirect_uris: str) -> list[str]:
    hosts: list[str] = []
    for uri in redirect_uris.split():
        host = urlsplit(uri).hostname or uri
        if host not in hosts:
            hosts.append(host)
    return hosts


def connected_clients(user: Any, *, now: datetime | None = None) -> list[ConnectedClient]:
    """Applications holding a live access token or an unrevoked refresh token for this user,
    each with what it last did at /mcp: three queries, however many clients."""
    applications = list(connected_applications(user, now=now))
    done = activity(user, (app.pk for app in applications))
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
            calls=done[app.pk].calls,
            refusal=done[app.pk].refusal,
        )
        for app in applications
    ]
