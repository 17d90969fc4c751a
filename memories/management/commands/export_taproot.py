from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from memories.management.users import user_named
from memories.portability import Export, ExportBusy


class Command(BaseCommand):
    help = (
        "Export an account's memories (archived ones included) and closings as JSON in the "
        "taproot/1 format, which import_taproot reads back. One export per account runs "
        "at a time."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--user", required=True, help="the account to export")
        parser.add_argument("--output", type=Path, help="write to this file (default: stdout)")

    def handle(self, *args: Any, **options: Any) -> None:
        owner = user_named(options["user"])
        output: Path | None = options["output"]
        try:
            export = Export(owner=owner, indent=1)
        except ExportBusy as busy:
            raise CommandError(busy.message) from None
        try:
            if output is None:
                for piece in export.pieces():
                    self.stdout.write(piece, ending="")
                self.stdout.write("\n", ending="")
                return
            try:
                with output.open("w", encoding="utf-8") as file:
                    for piece in export.pieces():
                        file.write(piece)
                    file.write("\n")
            except OSError as error:
                raise CommandError(f"Cannot write {output}: {error.strerror or error}.") from None
        finally:
            export.close()
        self.stderr.write(f"Exported {owner.username}'s store to {output}.")
