import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from memories.management.users import user_named
from memories.services.exporting import export_store


class Command(BaseCommand):
    help = (
        "Export an account's memories (archived ones included) and closings as JSON in the "
        "taproot/1 format, which import_taproot reads back."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--user", required=True, help="the account to export")
        parser.add_argument("--output", type=Path, help="write to this file (default: stdout)")

    def handle(self, *args: Any, **options: Any) -> None:
        owner = user_named(options["user"])
        text = json.dumps(export_store(owner=owner), ensure_ascii=False, indent=1) + "\n"
        output: Path | None = options["output"]
        if output is None:
            self.stdout.write(text, ending="")
            return
        try:
            output.write_text(text, encoding="utf-8")
        except OSError as error:
            raise CommandError(f"Cannot write {output}: {error.strerror or error}.") from None
        self.stderr.write(f"Exported {owner.username}'s store to {output}.")
