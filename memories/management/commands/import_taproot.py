import sys
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import DatabaseError, reset_queries
from tqdm import tqdm

from memories.errors import Refused
from memories.locks import is_lock_timeout
from memories.management.users import user_named
from memories.models import Category
from memories.portability import SOURCES
from memories.services import Imported, import_store


class Command(BaseCommand):
    help = (
        "Import memories into an account from a Taproot export, a backup of the original "
        "(Cloudflare) Taproot, a JSON array of memory records, the MCP reference memory "
        "server's JSONL file, an mcp-memory-service SQLite file, a Basic Memory folder (or "
        "a zip of one) or a plain list of bullets or paragraphs. The content says which; "
        "--from forces one. Records already present are skipped; a file with any bad "
        "record is refused whole."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", type=Path, help="the file (or Basic Memory folder) to import")
        parser.add_argument("--user", required=True, help="the account to import into")
        parser.add_argument(
            "--from", dest="source", choices=SOURCES, help="read it as this kind of store"
        )
        parser.add_argument(
            "--category",
            choices=[c.value for c in Category],
            help="the category of memories whose store gives none",
        )
        parser.add_argument(
            "--dry-run",
            action="store_true",
            help="say what would be imported and skipped, per category; change nothing",
        )
        parser.add_argument(
            "--allow-over-limits",
            action="store_true",
            help=(
                "take records beyond the tools' limits (memories an older import stored "
                "that way, moved to another account or server)"
            ),
        )

    def handle(self, *args: Any, **options: Any) -> None:
        owner = user_named(options["user"])
        path: Path = options["file"]
        if not path.exists():
            raise CommandError(f"Cannot read {path}: there is no such file or folder.")
        bars: dict[str, tqdm[Any]] = {}

        def progress(stage: str, records: int) -> None:
            # With DEBUG on (the local default) Django keeps the last 9,000 statements;
            # an import's bulk inserts would make that hundreds of megabytes.
            reset_queries()
            if stage not in bars:
                for bar in bars.values():
                    bar.close()
                # A bar on a terminal; nothing when the output goes to a file or a pipe.
                bars[stage] = tqdm(
                    desc=stage, unit=" records", disable=not sys.stderr.isatty(), file=sys.stderr
                )
            bars[stage].update(records)

        try:
            imported = import_store(
                owner=owner,
                data=path,
                source=options["source"],
                category=Category(options["category"]) if options["category"] else None,
                dry_run=options["dry_run"],
                allow_over_limits=options["allow_over_limits"],
                progress=progress,
            )
        except Refused as error:
            raise CommandError(str(error)) from None
        except OSError as error:
            raise CommandError(f"Cannot read {path}: {error.strerror or error}.") from None
        except DatabaseError as error:
            if not is_lock_timeout(error):
                raise
            raise CommandError(
                "The database is busy: another write held it longer than this import waits. "
                "Nothing was changed; run the command again."
            ) from None
        finally:
            for bar in bars.values():
                bar.close()
        self._report(imported)

    def _report(self, imported: Imported) -> None:
        self.stdout.write(imported.message)
        self.stdout.write(f"read as: {imported.source}")
        verb = "would be imported" if imported.dry_run else "imported"
        categories = sorted({*imported.created_by_category, *imported.skipped_by_category})
        for category in categories:
            self.stdout.write(
                f"  {category}: {imported.created_by_category.get(category, 0)} {verb}, "
                f"{imported.skipped_by_category.get(category, 0)} already present"
            )
        self.stdout.write(
            f"memories {verb}: {imported.memories}, skipped: {imported.memories_skipped}, "
            f"given new ids: {imported.reminted}, normalised: {imported.normalised}"
        )
        if imported.repeated:
            self.stdout.write(f"records the store holds twice, imported once: {imported.repeated}")
        if imported.closings or imported.closings_skipped or imported.source == "taproot":
            self.stdout.write(
                f"closings {verb}: {imported.closings}, skipped: {imported.closings_skipped}; "
                f"other keys ignored: {imported.ignored_keys}"
            )
        for reason, count in imported.left_out.items():
            if reason != "other keys":
                self.stdout.write(f"{reason}: {count}")
        if imported.normalised_existing:
            would = "that would be " if imported.dry_run else ""
            self.stdout.write(
                f"records already in the store {would}normalised: {imported.normalised_existing}"
            )
        if imported.snapshot_id:
            self.stdout.write(
                f"snapshot of the store before the import: {imported.snapshot_id} "
                f"(undo with `manage.py restore_snapshot {imported.snapshot_id}`)"
            )
