import sys
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from memories.conf import embedder, ranking_profile
from memories.maintenance import refresh_planner_statistics
from memories.management.users import user_named
from memories.models import Memory, RecallIndex
from memories.models.counts import recount
from memories.recall import REBUILD_BATCH, EmbedderUnavailable, rebuild


class Command(BaseCommand):
    help = (
        "Rebuild the recall index (tokens, ranking entries, live counts, the counts "
        "reflect and status read, and the memory "
        "vectors of the embedder TAPROOT_EMBEDDER names) for the relevance profile "
        "TAPROOT_RANKING names, in batches, for one user or for everyone. Needed after "
        "changing TAPROOT_RANKING or TAPROOT_EMBEDDER; running it again changes nothing."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--user", help="only this account (default: every account)")
        parser.add_argument(
            "--batch-size",
            type=int,
            default=REBUILD_BATCH,
            help=f"memories per transaction ({REBUILD_BATCH})",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            semantic = embedder()
        except EmbedderUnavailable as error:
            raise CommandError(str(error)) from error
        if options["user"]:
            owners = [user_named(options["user"])]
        else:
            with_rows = set(Memory.objects.values_list("owner_id", flat=True).distinct())
            with_rows |= set(RecallIndex.objects.values_list("owner_id", flat=True))
            owners = list(get_user_model().objects.filter(pk__in=with_rows).order_by("pk"))
        total = Memory.objects.filter(owner__in=owners).count()
        profile = ranking_profile().name
        # A bar on a terminal; nothing when the output goes to a file or a pipe.
        with tqdm(
            total=total, unit="memories", disable=not sys.stderr.isatty(), file=sys.stderr
        ) as bar:
            for owner in owners:
                bar.set_description(owner.get_username())
                rebuild(owner, batch_size=max(1, options["batch_size"]), advance=bar.update)
        wrong = recount([owner.pk for owner in owners])
        refresh_planner_statistics(vacuum=True)
        vectors = f" and the {semantic.name!r} embedder" if semantic is not None else ""
        self.stdout.write(
            f"Rebuilt the recall index of {len(owners)} account(s), {total} memories, "
            f"for the {profile!r} relevance profile{vectors}."
        )
        if wrong:
            self.stdout.write(f"Corrected {wrong} of the counts reflect and status read.")
