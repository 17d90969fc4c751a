import sys
from pathlib import Path
from typing import Any

from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.migrations.executor import MigrationExecutor

from memories.maintenance import refresh_planner_statistics
from memories.portability import (
    BackupError,
    Progress,
    new_index_generation,
    recall_index_is_stale,
    restore_backup,
)


class Command(BaseCommand):
    help = (
        "Restore a backup made by backup_taproot into the database DATABASE_URL names, "
        "which must be empty (or add --force: what it holds is backed up first, then "
        "replaced). The file is checked whole before anything changes; then migrations run, "
        "so a backup from an older Taproot restores into this one, and the recall index is "
        "rebuilt if it was built for another ranking profile or embedder."
    )
    # It runs on an empty database, before `migrate` has made any table.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path", type=Path, help="the backup file (taproot-….tar)")
        parser.add_argument(
            "--force",
            action="store_true",
            help="replace a database that holds data, after backing it up",
        )
        parser.add_argument(
            "--output",
            type=Path,
            help="with --force, the folder for the backup of what the database held "
            "(default: the folder of the backup being restored)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        path: Path = options["path"]
        quiet = options["verbosity"] == 0
        try:
            restored = restore_backup(
                path,
                force=options["force"],
                folder=options["output"] or path.parent,
                progress=Progress.on_terminal(),
            )
        except BackupError as error:
            raise CommandError(error.message) from None
        manifest = restored.manifest
        if restored.before is not None and not quiet:
            self.stdout.write(f"Backed up what the database held to {restored.before.path}.")
        applied = self.migrate()
        new_index_generation()
        stale = recall_index_is_stale(manifest)
        if stale:
            self.stdout.write(f"Rebuilding the recall index: {stale}.")
            call_command("reindex_taproot", stdout=self.stdout, stderr=self.stderr)
        refresh_planner_statistics(vacuum=True)
        if not quiet:
            self.stdout.write(
                f"Restored {manifest.describe()}; applied {applied} migration(s) since."
            )

    def migrate(self) -> int:
        """Bring the restored schema up to this Taproot's; how many migrations that took.
        Their names show on a terminal."""
        executor = MigrationExecutor(connections[DEFAULT_DB_ALIAS])
        pending = executor.migration_plan(executor.loader.graph.leaf_nodes())
        try:
            call_command(
                "migrate",
                interactive=False,
                verbosity=1 if sys.stdout.isatty() else 0,
                stdout=self.stdout,
            )
        except Exception as error:
            raise CommandError(
                f"The backup was restored, but migrating it to this Taproot's schema failed "
                f"({error}). Fix the cause and run `manage.py migrate`."
            ) from error
        return len(pending)
