from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from memories.errors import Refused
from memories.services import restore_snapshot


class Command(BaseCommand):
    help = (
        "Put the records of a snapshot back exactly as they were. The present state is "
        "snapshotted first, so a restore can be undone. A whole-store snapshot (taken "
        "before an import or a restore) also removes records made after it; a snapshot of "
        "some records (taken before migrate) leaves every other record alone."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("snapshot_id", help="the snapshot's id, as listed in the admin")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            restored = restore_snapshot(snapshot_id=options["snapshot_id"])
        except Refused as error:
            raise CommandError(str(error)) from None
        self.stdout.write(restored.message)
        self.stdout.write(
            f"memories put back: {restored.restored}, re-created: {restored.recreated}, "
            f"removed: {restored.removed}; closings put back: {restored.closings_restored}, "
            f"removed: {restored.closings_removed}"
        )
