"""manage.py commands for OAuth: issue a local access token, clean up stale registered
clients."""
