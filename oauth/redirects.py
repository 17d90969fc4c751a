"""Which redirect URIs an anonymous client may register.

Claude.ai's callbacks are always allowed. Local clients (the MCP Inspector, Claude Code)
use http on a loopback address with a port of their choosing (RFC 8252 §7.3); they are
allowed only when TAPROOT_ALLOW_LOOPBACK_CLIENTS is on. An operator can add exact URIs
with TAPROOT_EXTRA_REDIRECT_URIS.
"""

from urllib.parse import SplitResult, urlsplit

from django.conf import settings

from memories.quoting import shown

CLAUDE_CALLBACKS = (
    "https://claude.ai/api/mcp/auth_callback",
    "https://claude.com/api/mcp/auth_callback",
)
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})


def allowed_redirect_uris() -> tuple[str, ...]:
    """The exact URIs on the allowlist (loopback ones are matched by shape instead)."""
    return (*CLAUDE_CALLBACKS, *settings.TAPROOT_EXTRA_REDIRECT_URIS)


def loopback_parts(uri: str) -> SplitResult | None:
    """The parts of a well-formed URI on a loopback host, or None for any other."""
    try:
        parts = urlsplit(uri)
        parts.port  # noqa: B018  (raises on a malformed port)
    except ValueError:
        return None
    return parts if parts.hostname in LOOPBACK_HOSTS else None


def is_loopback_http(uri: str) -> bool:
    parts = loopback_parts(uri)
    return (
        parts is not None
        and parts.scheme == "http"
        and parts.username is None
        and parts.password is None
    )


def redirect_uri_problem(uri: object) -> str | None:
    """Why `uri` may not be registered anonymously, or None when it may."""
    if not isinstance(uri, str) or not uri:
        return "Each redirect URI must be a non-empty string."
    if "#" in uri:
        return f"The redirect URI {shown(uri)} has a fragment; redirect URIs must not have one."
    try:
        scheme = urlsplit(uri).scheme.lower()
    except ValueError:
        return f"The redirect URI {shown(uri)} is not a valid URI."
    if scheme not in {"http", "https"}:
        return (
            f"The redirect URI {shown(uri)} uses the {scheme or 'missing'}: scheme; "
            "only https (and http on a loopback address for local clients) is accepted."
        )
    if uri in allowed_redirect_uris():
        return None
    if is_loopback_http(uri):
        if settings.TAPROOT_ALLOW_LOOPBACK_CLIENTS:
            return None
        return (
            f"The redirect URI {shown(uri)} is a loopback address, and local clients are turned "
            "off on this server (TAPROOT_ALLOW_LOOPBACK_CLIENTS)."
        )
    return (
        f"The redirect URI {shown(uri)} is not on this server's allowlist. Allowed: "
        f"{', '.join(allowed_redirect_uris())}"
        + (
            ", and http on 127.0.0.1, localhost or [::1]."
            if settings.TAPROOT_ALLOW_LOOPBACK_CLIENTS
            else "."
        )
    )


def redirect_uris_problem(uris: object) -> str | None:
    """The first problem with a registration's `redirect_uris`, or None."""
    if not isinstance(uris, list):
        return "redirect_uris must be an array of strings."
    for uri in uris:
        problem = redirect_uri_problem(uri)
        if problem:
            return problem
    return None
