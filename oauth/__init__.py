"""Taproot's OAuth 2.1 authorization server for its one protected resource, /mcp.

django-oauth-toolkit speaks the protocol; this app holds what Taproot adds to it:
registration, consent and authorization-code rules, the one resource-URL rule (which
/mcp's token check uses too), the clients and tokens a user has (listing and revoking
them, issuing local tokens) and the cleanup of stale registered clients.
"""
