"""Tests of taproot_site: settings, the ASGI entry point, the server launcher,
migrations."""
