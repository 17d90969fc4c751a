from datetime import timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from oauth.cleanup import delete_stale_registered_clients


class Command(BaseCommand):
    help = (
        "Delete dynamically registered OAuth clients older than --days (default 30) that "
        "hold no live authorization code, access token or refresh token. Run it daily."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--days", type=int, default=30, help="minimum age in days (default 30)")
        parser.add_argument("--dry-run", action="store_true", help="count, delete nothing")

    def handle(self, *args: Any, days: int, dry_run: bool, **options: Any) -> None:
        if days < 1:
            raise CommandError("--days must be at least 1.")
        count = delete_stale_registered_clients(older_than=timedelta(days=days), dry_run=dry_run)
        noun = "client" if count == 1 else "clients"
        if dry_run:
            self.stdout.write(f"{count} stale registered {noun} would be deleted (dry run).")
        else:
            self.stdout.write(f"Deleted {count} stale registered {noun} (older than {days} days).")
