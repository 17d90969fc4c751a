from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from memories.portability import BackupError, Progress, default_folder, prune, take_backup


class Command(BaseCommand):
    help = (
        "Back up the whole database — every account, OAuth client and token, memory, "
        "revision, snapshot, closing and recall index — into one file named with the time, "
        "while the server runs and writes: SQLite through its online backup API, PostgreSQL "
        "with pg_dump. The file is checked once written; restore_taproot puts it back."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--output",
            type=Path,
            help="the folder to write the backup into, made if missing (default: backups/ "
            "in the project folder)",
        )
        parser.add_argument(
            "--keep",
            type=int,
            metavar="N",
            help="then delete all but the newest N backups in that folder",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        keep: int | None = options["keep"]
        if keep is not None and keep < 1:
            raise CommandError("--keep must be at least 1: it counts the backups to keep.")
        folder: Path = options["output"] or default_folder()
        try:
            backup = take_backup(folder, progress=Progress.on_terminal())
            pruned = (
                prune(folder, keep=keep, written=backup.path, now=datetime.now(UTC))
                if keep is not None
                else None
            )
        except BackupError as error:
            raise CommandError(error.message) from None
        if pruned is not None and pruned.from_the_future:
            self.stderr.write(
                f"{len(pruned.from_the_future)} backup(s) in {folder} are named with a time "
                "later than now, so the clock that named them was wrong or this one is: they "
                "were neither counted toward --keep nor deleted. Check them and remove them "
                "yourself: " + ", ".join(path.name for path in pruned.from_the_future)
            )
        removed = pruned.removed if pruned is not None else []
        if options["verbosity"] == 0:
            return
        size = backup.path.stat().st_size
        self.stdout.write(
            f"Wrote {backup.path} ({size / 1024 / 1024:.1f} MB): {backup.manifest.describe()}."
        )
        if removed:
            self.stdout.write(
                f"Deleted {len(removed)} older backup(s), keeping the newest {keep}: "
                + ", ".join(path.name for path in removed)
            )
