"""Tests of the Django admin (memories/admin.py)."""
