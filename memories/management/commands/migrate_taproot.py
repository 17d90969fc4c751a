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
        reply = migrate(owner=owner, dry_run=options["dry_run"])
        self.stdout.write(reply["message"])
        self.stdout.write(
            f"migrated: {reply['migrated']}, already normalised: {reply['already_migrated']}, "
            f"total: {reply['total']}"
        )
        snapshots = [reply["snapshot_id"]] if owner else reply["snapshot_ids"]
        if any(snapshots):
            self.stdout.write("snapshots: " + ", ".join(str(s) for s in snapshots if s))
        self.stdout.write(f"categories before: {reply['category_counts_before']}")
        self.stdout.write(f"categories after: {reply['category_counts_after']}")
