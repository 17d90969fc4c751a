"""Taproot's measuring instruments: speed at scale and retrieval quality.

Run everything with `bench/run` (or `.venv/bin/python -m bench`); see docs/benchmarks.md.
Nothing here is imported by the application, and nothing here is a timed test.
"""
