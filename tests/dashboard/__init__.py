"""Tests of the dashboard app: its pages, forms and queries, and a real browser."""
