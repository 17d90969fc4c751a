from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from memories.errors import Refused
from memories.management.users import user_named
from memories.services import import_store


class Command(BaseCommand):
    help = (
        "Import memories and closings into an account from a Taproot export, a backup of "
        "the original (Cloudflare) Taproot, or a JSON array of memory records. Records "
        "already present are skipped; a file with any bad record is refused whole."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", type=Path, help="the JSON file to import")
        parser.add_argument("--user", required=True, help="the account to import into")

    def handle(self, *args: Any, **options: Any) -> None:
        owner = user_named(options["user"])
        path: Path = options["file"]
        try:
            data = path.read_bytes()
        except OSError as error:
            raise CommandError(f"Cannot read {path}: {error.strerror or error}.") from None
        try:
            imported = import_store(owner=owner, data=data)
        except Refused as error:
            raise CommandError(str(error)) from None
        self.stdout.write(imported.message)
        self.stdout.write(
            f"memories imported: {imported.memories}, skipped: {imported.memories_skipped}, "
            f"given new ids: {imported.reminted}, normalised: {imported.normalised}"
        )
        self.stdout.write(
            f"closings imported: {imported.closings}, skipped: {imported.closings_skipped}; "
            f"other keys ignored: {imported.ignored_keys}"
        )
        if imported.normalised_existing:
            self.stdout.write(
                f"records already in the store normalised: {imported.normalised_existing}"
            )
        if imported.snapshot_id:
            self.stdout.write(
                f"snapshot of the store before the import: {imported.snapshot_id} "
                f"(undo with `manage.py restore_snapshot {imported.snapshot_id}`)"
            )
