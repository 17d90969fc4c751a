from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from memories.errors import InvalidInput
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
            reply = import_store(owner=owner, data=data)
        except InvalidInput as error:
            raise CommandError(error.message) from None
        self.stdout.write(reply["message"])
        self.stdout.write(
            f"memories imported: {reply['imported']}, skipped: {reply['skipped']}, "
            f"given new ids: {reply['reminted']}, normalised: {reply['normalised']}"
        )
        self.stdout.write(
            f"closings imported: {reply['closings_imported']}, "
            f"skipped: {reply['closings_skipped']}; other keys ignored: {reply['ignored_keys']}"
        )
        if reply["normalised_existing"]:
            self.stdout.write(
                f"records already in the store normalised: {reply['normalised_existing']}"
            )
        if reply["snapshot_id"]:
            self.stdout.write(
                f"snapshot of the store before the import: {reply['snapshot_id']} "
                f"(undo with `manage.py restore_snapshot {reply['snapshot_id']}`)"
            )
