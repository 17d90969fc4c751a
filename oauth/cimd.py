"""Clients that register by Client ID Metadata Document (CIMD), beside DCR.

A client may name itself by the https URL of a JSON document describing it, as Claude
does (`https://claude.ai/oauth/mcp-oauth-client-metadata`) when the authorization
server's metadata says `client_id_metadata_document_supported`. django-oauth-toolkit
resolves such an id on first sight: it fetches the document (https only, to public
addresses only, no redirects, a bounded size and time), checks that it names its own
URL, keeps the client as one Application whose freshness follows the document's cache
headers, and fetches it again once stale. Taproot adds:

- the unsupported grant types a document lists (Claude's lists the jwt-bearer grant
  beside the authorization code) are left aside rather than refusing the client, which
  django-oauth-toolkit would do ("exactly one non-refresh grant type");
- a document's redirect URIs must pass the rules registration applies (oauth.redirects:
  Claude's callbacks, loopback ones when local clients are on, the operator's own);
- with TAPROOT_ALLOW_LOOPBACK_CLIENTS (on under DEBUG), an `http://` id on a loopback
  address is resolved too, for local development and the tests;
- why a document was refused is kept for a few minutes, so the page the browser lands on
  can say it (django-oauth-toolkit only logs it, and the client then looks unknown).
"""

import hashlib
from typing import Any
from urllib.parse import urlsplit

import urllib3
from django.conf import settings
from django.core.cache import cache
from oauth2_provider import cimd
from oauth2_provider.settings import oauth2_settings
from oauthlib.common import Request

from oauth.redirects import is_loopback_http, redirect_uris_problem

SUPPORTED_GRANT_TYPES = ("authorization_code", "refresh_token")
# How long the reason a document was refused stays at hand for the page that says it.
REFUSAL_SECONDS = 300
_REFUSAL_KEY = "taproot:cimd:refused:"


def _key(client_id: str) -> str:
    return _REFUSAL_KEY + hashlib.sha256(client_id.encode("utf-8", "replace")).hexdigest()


def refusal_of(client_id: str) -> str | None:
    """Why the document at `client_id` was last refused, if lately."""
    found = cache.get(_key(client_id))
    return found if isinstance(found, str) else None


def loopback_id_allowed(client_id: str) -> bool:
    """An http client id on a loopback address, while local clients are on."""
    return bool(settings.TAPROOT_ALLOW_LOOPBACK_CLIENTS) and is_loopback_http(client_id)


def is_document_id(client_id: object) -> bool:
    """A client id this server resolves as a metadata document."""
    return isinstance(client_id, str) and (
        cimd.is_cimd_client_id(client_id) or loopback_id_allowed(client_id)
    )


class Fetcher(cimd.SafeMetadataFetcher):  # type: ignore[misc]  # no type information
    """django-oauth-toolkit's fetcher (CIMD_METADATA_FETCHER) with Taproot's rules (this
    module's docstring); a refusal's reason is kept for the page that says it."""

    def fetch(self, client_id: str) -> tuple[dict[str, Any], int]:
        try:
            if loopback_id_allowed(client_id):
                metadata, max_age = self._fetch_loopback(client_id)
            else:
                metadata, max_age = super().fetch(client_id)
            return self._checked(client_id, metadata), max_age
        except cimd.CIMDError as error:
            cache.set(_key(client_id), _reason(error), REFUSAL_SECONDS)
            raise

    def _fetch_loopback(self, client_id: str) -> tuple[dict[str, Any], int]:
        """The document at a loopback http URL, with the same bounds as an https one."""
        timeout = oauth2_settings.CIMD_FETCH_TIMEOUT_SECONDS
        http = urllib3.PoolManager(
            timeout=urllib3.Timeout(connect=timeout, read=timeout, total=timeout), retries=False
        )
        try:
            response = http.request(
                "GET",
                client_id,
                headers={"Accept": "application/json"},
                redirect=False,
                preload_content=False,
            )
        except urllib3.exceptions.HTTPError as error:
            raise cimd.CIMDError(f"could not fetch client_id document: {error}") from error
        try:
            document: tuple[dict[str, Any], int] = self._read_document(response)
            return document
        finally:
            response.release_conn()
            http.clear()

    @staticmethod
    def _checked(client_id: str, metadata: dict[str, Any]) -> dict[str, Any]:
        if metadata.get("client_id") != client_id:
            raise cimd.CIMDError("document client_id does not match the client_id URL")
        problem = redirect_uris_problem(metadata.get("redirect_uris"))
        if problem:
            raise cimd.CIMDError(problem)
        grant_types = metadata.get("grant_types", ["authorization_code"])
        if isinstance(grant_types, list):
            supported = [g for g in grant_types if g in SUPPORTED_GRANT_TYPES]
            if "authorization_code" not in supported:
                raise cimd.CIMDError("its grant_types do not include authorization_code")
            metadata = {**metadata, "grant_types": supported}
        return metadata


def _reason(error: Exception) -> str:
    """A refusal as the consent page says it."""
    text = str(error)
    known = {
        "document client_id does not match": "its client_id is not the address it was fetched from",
        "exceeds the maximum allowed size": "it is larger than the "
        f"{oauth2_settings.CIMD_MAX_DOCUMENT_SIZE // 1024} KB a client description may be",
        "returned HTTP": "the address did not answer with a document ("
        + text.rsplit("HTTP", 1)[-1].strip()
        + ")",
        "could not fetch": "the address could not be reached",
        "non-public address": "it lives on a private or loopback address",
        "is not JSON": "it is not a JSON document",
        "not valid JSON": "it is not a JSON document",
        "must be a JSON object": "it is not a JSON object",
    }
    for marker, said in known.items():
        if marker in text:
            return said
    return text


def resolve(client_id: str, request: Request) -> Any:
    """The Application of a loopback http client id, resolved as django-oauth-toolkit
    resolves an https one (its permission classes, its failure backoff and its cap on
    fetches in flight), or None."""
    if not loopback_id_allowed(client_id):
        return None
    if not cimd._registration_permitted(request, client_id):
        return None
    backoff = cimd._backoff_cache_key(client_id)
    if cache.get(backoff):
        return None
    with cimd._fetch_slot() as acquired:
        if not acquired:
            return None
        try:
            return cimd._fetch_validate_upsert(client_id)
        except cimd.CIMDError:
            cache.set(backoff, True, oauth2_settings.CIMD_FAILURE_BACKOFF_SECONDS)
            return None


def document_host(client_id: str) -> str:
    """Where a client's description lives, as the consent page shows it."""
    return urlsplit(client_id).netloc or client_id
