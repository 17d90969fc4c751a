"""manage.py commands for the store: import, export, migrate, reindex, restore a snapshot,
and the first administrator account. Each is a thin interface over memories.services."""
