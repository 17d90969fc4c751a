"""Tests of taproot_site: settings, the ASGI entry point's admission, the server launcher,
migrations."""
