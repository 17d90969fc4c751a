"""WSGI entry point (for tools that want one; `/mcp` needs the ASGI application)."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "taproot_site.settings")

application = get_wsgi_application()
