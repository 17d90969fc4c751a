from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from memories.management.users import user_named
from memories.services import migrate


class Command(BaseCommand):
    help = (
        "Normalise stored memories (legacy categories, numeric salience, list fields, "
        "missing gists) for one user or for everyone. Takes a snapshot first; running it "
        "again changes nothing."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--user", help="only this account (default: every account)")
        parser.add_argument(
            "--dry-run", action="store_true", help="report what would change, change nothing"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        owner = user_named(options["user"]) if options["user"] else None
        migrated = migrate(owner=owner, dry_run=options["dry_run"])
        self.stdout.write(migrated.message)
        self.stdout.write(
            f"migrated: {migrated.migrated}, "
            f"already normalised: {migrated.total - migrated.migrated}, "
            f"total: {migrated.total}"
        )
        if migrated.snapshot_ids:
            self.stdout.write("snapshots: " + ", ".join(map(str, migrated.snapshot_ids)))
        if owner is None and len(migrated.owners) > 1:
            for one in migrated.owners:
                self.stdout.write(f"  {one.username}: {one.migrated} of {one.total} normalised")
        self.stdout.write(f"categories before: {migrated.counts_before}")
        self.stdout.write(f"categories after: {migrated.counts_after}")
