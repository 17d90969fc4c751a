"""The test suite: one folder per app (tests move with the code they test). Shared
scaffolding: tests/conftest.py (users, memories, the clock, the MCP client's portal) and
tests/store.py (the guard that a refused call changed nothing)."""
