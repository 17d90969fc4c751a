"""How many memories each owner has, by what reflect and status show: kept by the
database itself on every write, so that neither has to count a whole store."""

from django.conf import settings
from django.db import models, transaction
from django.db.models import Count, Q

from memories.models.choices import User


class StoreCountQuerySet(models.QuerySet["StoreCount"]):
    def for_owner(self, owner: User) -> "StoreCountQuerySet":
        return self.filter(owner=owner, n__gt=0)


class StoreCount(models.Model):
    """The number of an owner's memories of one category, tier, salience (as stored) and
    state (live or archived).

    Triggers on the memory table keep it (migration 0011, memories.models.counts_sql),
    in the statement that writes the memory: every path that writes one (the services,
    the bulk writes, an import, a restore, the admin, raw SQL) moves it in the same
    transaction, and none can forget to. `check_store_counts` compares it with the rows.
    """

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    category = models.CharField(max_length=64)
    core = models.BooleanField()
    salience = models.CharField(max_length=32)
    archived = models.BooleanField()
    n = models.IntegerField(default=0)

    objects = StoreCountQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["owner", "category", "core", "salience", "archived"], name="storecount_key"
            )
        ]

    def __str__(self) -> str:
        return f"{self.n} {self.category}"


Key = tuple[int, str, bool, str, bool]


def counted_rows(owner_ids: list[int] | None = None) -> dict[Key, int]:
    """What the counts should be, counted from the memory rows (the check and the repair)."""
    from memories.models.memory import Memory

    rows = Memory.objects.order_by()
    if owner_ids is not None:
        rows = rows.filter(owner_id__in=owner_ids)
    grouped = rows.values_list("owner_id", "category", "core", "salience").annotate(
        live=Count("pk", filter=Q(archived_at__isnull=True)),
        archived=Count("pk", filter=Q(archived_at__isnull=False)),
    )
    counts: dict[Key, int] = {}
    for owner_id, category, core, salience, live, archived in grouped:
        for is_archived, n in ((False, live), (True, archived)):
            if n:
                counts[(owner_id, category, core, salience, is_archived)] = n
    return counts


def kept_counts(owner_ids: list[int] | None = None) -> dict[Key, int]:
    rows = StoreCount.objects.exclude(n=0)
    if owner_ids is not None:
        rows = rows.filter(owner_id__in=owner_ids)
    return {
        (o, c, core, salience, archived): n
        for o, c, core, salience, archived, n in rows.values_list(
            "owner_id", "category", "core", "salience", "archived", "n"
        )
    }


def recount(owner_ids: list[int] | None = None) -> int:
    """Make the owners' counts (everyone's by default) again from the rows; how many
    were wrong. Deleted first: on PostgreSQL a write still open holds its count's row,
    so the delete waits for it to commit and the count that follows sees it."""
    with transaction.atomic():
        kept = StoreCount.objects.all()
        if owner_ids is not None:
            kept = kept.filter(owner_id__in=owner_ids)
        before = kept_counts(owner_ids)
        kept.delete()
        rows = counted_rows(owner_ids)
        StoreCount.objects.bulk_create(
            StoreCount(owner_id=o, category=c, core=core, salience=sal, archived=archived, n=n)
            for (o, c, core, sal, archived), n in rows.items()
        )
    return sum(1 for key in before.keys() | rows.keys() if before.get(key) != rows.get(key))
