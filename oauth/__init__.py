"""Taproot's OAuth 2.1 authorization server for its own /mcp resource.

django-oauth-toolkit does the protocol; this package configures and hardens it: the
redirect allowlist, registration throttling and the shape of registration replies, the
one resource every grant and token is bound to, the consent page's context, a request
log, system checks and the cleanup of stale registered clients.
"""
