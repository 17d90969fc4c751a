"""The operator's OAuth commands (manage.py): see oauth.management.commands."""
