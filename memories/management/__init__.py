"""The operator's commands for the store (manage.py): see memories.management.commands."""
