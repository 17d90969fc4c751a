"""A memory: the record of SPEC §2, and the queries the services and interfaces ask of
a user's memories."""

import uuid
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import models
from django.db.models import Case, Count, Exists, OuterRef, Q, Value, When
from django.db.models.functions import Cast, Substr

from memories import vocabulary
from memories.models.choices import Category, EpistemicStatus, Salience, Tier, User
from memories.models.history import DismissedSuggestion
from memories.models.recall_index import MemoryTag
from memories.timeutil import isoformat, parse_timestamp
from memories.vocabulary import (
    ARCHIVE_IDLE_DAYS,
    CATEGORY_ORDER,
    DEMOTE_IDLE_DAYS,
    PROMOTE_MIN_RECALLS,
    PROMOTE_RECALLED_WITHIN_DAYS,
    SALIENCE_RANK,
    SHORT_ID_MIN,
    TRACKED_FIELDS,
)


def _list_copy(value: Any) -> Any:
    # A drifted store may hold a bare string here until migrate repairs it; keep it as
    # stored rather than splitting it into characters.
    return list(value) if isinstance(value, list) else value


def _salience_rank() -> Case:
    """`vocabulary.SALIENCE_RANK` as SQL: high 0, medium 1, low 2, drifted values last."""
    return Case(
        *(When(salience=value, then=Value(rank)) for value, rank in SALIENCE_RANK.items()),
        default=Value(vocabulary.UNKNOWN_SALIENCE_RANK),
    )


class MemoryQuerySet(models.QuerySet["Memory"]):
    def for_owner(self, owner: User | int) -> "MemoryQuerySet":
        """The memories of this user (or user id)."""
        return self.filter(owner=owner)

    def live(self) -> "MemoryQuerySet":
        return self.filter(archived_at__isnull=True)

    def archived(self) -> "MemoryQuerySet":
        return self.filter(archived_at__isnull=False)

    def core(self) -> "MemoryQuerySet":
        return self.filter(core=True)

    def non_core(self) -> "MemoryQuerySet":
        return self.filter(core=False)

    def in_category(self, category: str) -> "MemoryQuerySet":
        return self.filter(category=category)

    def updated_since(self, moment: datetime) -> "MemoryQuerySet":
        return self.filter(updated_at__gte=moment)

    def catalog_window_q(self, now: datetime, window_days: int | None) -> Q:
        """Which non-core memories the catalog may list; with no window (None), all of them,
        and the budget alone decides which lines are sent."""
        if window_days is None:
            return Q(pk__isnull=False)
        return Q(salience=Salience.HIGH) | Q(last_touched_at__gte=now - timedelta(days=window_days))

    def in_catalog_window(self, now: datetime, window_days: int | None) -> "MemoryQuerySet":
        """Non-core memories that earn a catalog line: high salience or touched lately."""
        return self.filter(self.catalog_window_q(now, window_days))

    def in_catalog_order(self) -> "MemoryQuerySet":
        """Salience high to low, last touch newest first, then id (the catalog's order)."""
        return self.alias(salience_rank=_salience_rank()).order_by(
            "salience_rank", "-last_touched_at", "id"
        )

    def touched_lately(self, now: datetime, window_days: int) -> "MemoryQuerySet":
        """Touched within the catalog window (one of its two ways in)."""
        return self.filter(last_touched_at__gte=now - timedelta(days=window_days))

    def tier_counts(
        self, now: datetime, window_days: int | None
    ) -> dict[str, tuple[int, int, int]]:
        """Per stored category: (core memories, non-core memories the catalog window admits,
        non-core memories it leaves out)."""
        window = self.catalog_window_q(now, window_days)
        # Grouped as the tiers index orders its entries, so it is read alone.
        rows = (
            self.order_by()
            .values_list("core", "category")
            .annotate(inside=Count("pk", filter=window), outside=Count("pk", filter=~window))
        )
        counts: dict[str, tuple[int, int, int]] = {}
        for core, category, inside, outside in rows:
            core_n, admitted, left_out = counts.get(category, (0, 0, 0))
            if core:
                core_n += inside + outside
            else:
                admitted, left_out = inside, outside
            counts[category] = (core_n, admitted, left_out)
        return counts

    def in_core_order(self) -> "MemoryQuerySet":
        """Salience high to low, last touch newest first, then id: the order in which core
        memories earn a place in full when they do not all fit the budget."""
        return self.in_catalog_order()

    def with_id_prefixes(self, prefixes: Iterable[str]) -> "MemoryQuerySet":
        """Memories whose id starts with one of these SHORT_ID_MIN-character prefixes."""
        return self.filter(id_prefix__in=list(prefixes))

    def sharing_id_prefixes(self, prefixes: Iterable[str]) -> "MemoryQuerySet":
        """Memories whose SHORT_ID_MIN-character id prefix is one of these and is shared
        with another memory of the same queryset (in one query)."""
        shared = (
            self.with_id_prefixes(prefixes)
            .order_by()
            .values("id_prefix")
            .annotate(n=Count("pk"))
            .filter(n__gt=1)
            .values("id_prefix")
        )
        return self.filter(id_prefix__in=shared)

    # Suggestions (never applied by themselves): the rules of memories.vocabulary.

    def promotion_candidates(self, now: datetime) -> "MemoryQuerySet":
        """Live non-core memories recalled often, and lately."""
        since = now - timedelta(days=PROMOTE_RECALLED_WITHIN_DAYS)
        # The last touch is at least the last recall: it lets the index narrow the scan.
        return (
            self.live()
            .non_core()
            .filter(
                retrieval_count__gte=PROMOTE_MIN_RECALLS,
                last_retrieved__gte=since,
                last_touched_at__gte=since,
            )
        )

    def demotion_candidates(self, now: datetime) -> "MemoryQuerySet":
        """Live core memories neither recalled nor updated for DEMOTE_IDLE_DAYS."""
        return self.live().core().filter(last_touched_at__lt=now - timedelta(days=DEMOTE_IDLE_DAYS))

    def archive_candidates(self, now: datetime) -> "MemoryQuerySet":
        """Live non-core low-salience memories never recalled and idle for ARCHIVE_IDLE_DAYS."""
        return (
            self.live()
            .non_core()
            .filter(
                salience=Salience.LOW,
                retrieval_count=0,
                last_retrieved__isnull=True,
                last_touched_at__lt=now - timedelta(days=ARCHIVE_IDLE_DAYS),
            )
        )

    def not_dismissed(self, kind: str) -> "MemoryQuerySet":
        dismissed = DismissedSuggestion.objects.filter(memory=OuterRef("pk"), kind=kind)
        return self.filter(~Exists(dismissed))

    def outside_catalog_window(self, now: datetime, window_days: int | None) -> "MemoryQuerySet":
        return self.exclude(self.catalog_window_q(now, window_days))

    def category_counts(self) -> dict[str, int]:
        rows = self.order_by().values_list("category").annotate(n=Count("pk"))
        return {category: n for category, n in rows}

    def state_counts(self) -> dict[str, int]:
        """All, live, archived and live core memories, in one query."""
        return self.aggregate(
            total=Count("pk"),
            live=Count("pk", filter=Q(archived_at__isnull=True)),
            archived=Count("pk", filter=Q(archived_at__isnull=False)),
            core=Count("pk", filter=Q(archived_at__isnull=True, core=True)),
        )

    def with_tier(self, now: datetime, window_days: int | None) -> "MemoryQuerySet":
        """Annotate `tier` (a Tier value) by the same window rule reflect uses."""
        return self.annotate(
            tier=Case(
                When(archived_at__isnull=False, then=Value(Tier.ARCHIVED.value)),
                When(core=True, then=Value(Tier.CORE.value)),
                When(self.catalog_window_q(now, window_days), then=Value(Tier.CATALOG.value)),
                default=Value(Tier.OMITTED.value),
                output_field=models.CharField(),
            )
        )

    def in_tier(self, tier: str, now: datetime, window_days: int | None) -> "MemoryQuerySet":
        if tier == Tier.ARCHIVED:
            return self.archived()
        if tier == Tier.CORE:
            return self.live().core()
        if tier == Tier.CATALOG:
            return self.live().non_core().in_catalog_window(now, window_days)
        if tier == Tier.OMITTED:
            return self.live().non_core().outside_catalog_window(now, window_days)
        raise ValueError(f"unknown tier {tier!r}")

    def in_categories(self, categories: list[str]) -> "MemoryQuerySet":
        return self.filter(category__in=categories)

    def with_salience(self, salience: str) -> "MemoryQuerySet":
        return self.filter(salience=salience)

    def with_autogenerated_gist(self) -> "MemoryQuerySet":
        return self.filter(gist_autogenerated=True)

    def search(self, text: str) -> "MemoryQuerySet":
        """Memories whose gist, content or a tag contains every word of `text`."""
        queryset = self
        for term in text.split():
            tag_hit = MemoryTag.objects.filter(
                memory=OuterRef("pk"), key__icontains=term.casefold()
            )
            queryset = queryset.filter(
                Q(gist__icontains=term) | Q(content__icontains=term) | Exists(tag_hit)
            )
        return queryset

    def recently_updated(self) -> "MemoryQuerySet":
        return self.order_by("-updated_at", "id")

    def least_recently_updated(self) -> "MemoryQuerySet":
        return self.order_by("updated_at", "id")

    def most_recalled(self) -> "MemoryQuerySet":
        return self.order_by("-retrieval_count", "-updated_at", "id")

    def by_salience(self) -> "MemoryQuerySet":
        """High to low (drifted values last), then newest first."""
        return self.alias(salience_rank=_salience_rank()).order_by(
            "salience_rank", "-updated_at", "id"
        )

    def by_category(self) -> "MemoryQuerySet":
        """In the payload's category order (drifted names last), then newest first."""
        rank = Case(
            *(When(category=c, then=Value(r)) for r, c in enumerate(CATEGORY_ORDER)),
            default=Value(len(CATEGORY_ORDER)),
        )
        return self.alias(category_rank=rank).order_by(
            "category_rank", "category", "-updated_at", "id"
        )


class Memory(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memories"
    )
    # Choices, not check constraints: a store holding legacy drift must load so that
    # migrate can repair it.
    category = models.CharField(max_length=64, choices=Category.choices)
    content = models.TextField()
    gist = models.TextField(blank=True)
    gist_autogenerated = models.BooleanField(default=False)
    salience = models.CharField(max_length=32, choices=Salience.choices, default=Salience.MEDIUM)
    core = models.BooleanField(default=False)
    tags = models.JSONField(default=list, blank=True)
    search_keywords = models.JSONField(default=list, blank=True)
    linked_memories = models.JSONField(default=list, blank=True)
    conversation_url = models.TextField(null=True, blank=True)  # noqa: DJ001 (null = not given)
    conversation_id = models.TextField(null=True, blank=True)  # noqa: DJ001
    transcript_ref = models.TextField(null=True, blank=True)  # noqa: DJ001
    provenance = models.TextField(null=True, blank=True)  # noqa: DJ001
    epistemic_status = models.CharField(
        max_length=32, choices=EpistemicStatus.choices, default=EpistemicStatus.UNVALIDATED
    )
    replication_count = models.IntegerField(default=0)
    compression_level = models.IntegerField(default=0)
    # Set by the domain code, never auto_now: some edits must leave updated_at alone.
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()
    last_retrieved = models.DateTimeField(null=True, blank=True)
    retrieval_count = models.PositiveIntegerField(default=0)
    # The later of updated_at and last_retrieved, kept so the catalog window and the
    # dashboard's "last touch" are one indexed column.
    last_touched_at = models.DateTimeField()
    archived_at = models.DateTimeField(null=True, blank=True)
    archive_reason = models.TextField(null=True, blank=True)  # noqa: DJ001
    # Hashes of the normalised gist and content, for the duplicate warning.
    gist_hash = models.CharField(max_length=64, blank=True)
    content_hash = models.CharField(max_length=64, blank=True)
    # The id's first hex characters, kept by the database itself (whichever path wrote the
    # row), so short ids are found by an indexed lookup, never by reading every id.
    id_prefix = models.GeneratedField(
        expression=Substr(Cast("id", output_field=models.CharField()), 1, SHORT_ID_MIN),
        output_field=models.CharField(max_length=SHORT_ID_MIN),
        db_persist=True,
    )

    objects = MemoryQuerySet.as_manager()

    class Meta:
        ordering = ["-updated_at"]
        verbose_name_plural = "memories"
        indexes = [
            models.Index(
                fields=["owner", "category"],
                condition=Q(archived_at__isnull=True),
                name="memory_live_category",
            ),
            # Serves reflect whole: core memories, the catalog window's counts per
            # category, and the catalog order, all from the index alone.
            models.Index(
                fields=["owner", "core", "category", "salience", "last_touched_at", "id"],
                condition=Q(archived_at__isnull=True),
                name="memory_live_tiers",
            ),
            models.Index(
                fields=["owner", "last_touched_at"],
                condition=Q(archived_at__isnull=True),
                name="memory_live_last_touch",
            ),
            models.Index(fields=["owner", "updated_at"], name="memory_owner_updated"),
            # The export's order: each of its batches starts where the last one ended.
            models.Index(fields=["owner", "created_at", "id"], name="memory_owner_created"),
            models.Index(
                fields=["owner", "content_hash"],
                condition=Q(archived_at__isnull=True),
                name="memory_live_content_hash",
            ),
            models.Index(
                fields=["owner", "gist_hash"],
                condition=Q(archived_at__isnull=True),
                name="memory_live_gist_hash",
            ),
            models.Index(fields=["owner", "id_prefix"], name="memory_owner_id_prefix"),
            # Core and catalog memories in the order reflect shows them, a salience at a
            # time: it reads the first of each and stops once the budget is full.
            models.Index(
                fields=["owner", "core", "salience", "-last_touched_at", "id"],
                condition=Q(archived_at__isnull=True),
                name="memory_live_tier_order",
            ),
            # The suggestions' rules, each counted in its index alone and listed in its
            # order from it (memories.services.suggestions): core memories by last touch
            # (demote), low-salience non-core ones never recalled (archive), non-core ones
            # recalled often, by their last recall (promote). Each condition's columns are
            # also its index's last fields: SQLite reads a partial index alone only when
            # it holds every column the query names, its condition's too.
            models.Index(
                fields=["owner", "last_touched_at", "id", "archived_at", "core"],
                condition=Q(archived_at__isnull=True, core=True),
                name="memory_live_demote_order",
            ),
            models.Index(
                fields=[
                    "owner",
                    "last_touched_at",
                    "id",
                    "archived_at",
                    "core",
                    "salience",
                    "retrieval_count",
                    "last_retrieved",
                ],
                condition=Q(
                    archived_at__isnull=True,
                    core=False,
                    salience="low",
                    retrieval_count=0,
                    last_retrieved__isnull=True,
                ),
                name="memory_live_archive_order",
            ),
            models.Index(
                fields=[
                    "owner",
                    "last_retrieved",
                    "last_touched_at",
                    "retrieval_count",
                    "id",
                    "archived_at",
                    "core",
                ],
                condition=Q(
                    archived_at__isnull=True,
                    core=False,
                    retrieval_count__gte=PROMOTE_MIN_RECALLS,
                ),
                name="memory_live_promote_order",
            ),
        ]

    def __str__(self) -> str:
        return self.gist or self.content[:80]

    @property
    def is_archived(self) -> bool:
        return self.archived_at is not None

    @property
    def short_id(self) -> str:
        """The id as people and Claude see it: the shortest prefix no other memory of the
        owner's shares, once memories.shortids.attach_short_ids has found it."""
        return getattr(self, "_short_id", None) or str(self.id)[:SHORT_ID_MIN]

    def tier_at(self, now: datetime, window_days: int | None) -> Tier:
        """The tier by the window rule reflect uses (MemoryQuerySet.with_tier in SQL)."""
        if self.archived_at is not None:
            return Tier.ARCHIVED
        if self.core:
            return Tier.CORE
        if window_days is None:
            return Tier.CATALOG
        window_start = now - timedelta(days=window_days)
        if self.salience == Salience.HIGH or self.last_touched_at >= window_start:
            return Tier.CATALOG
        return Tier.OMITTED

    # --- single-memory changes, saved by memories.services (change_memory) -------------

    def touch(self, now: datetime) -> None:
        """Mark as updated now (the edits that move updated_at, SPEC §2)."""
        self.updated_at = now
        self.last_touched_at = vocabulary.last_touch_of(now, self.last_retrieved)

    def curate(self, *, core: bool | None = None, salience: str | None = None) -> None:
        """Set core and/or salience (None leaves each as it is). A salience outside the
        vocabulary is refused (ValueError): interfaces read theirs into a Salience."""
        if core is not None:
            self.core = core
        if salience is not None:
            self.salience = Salience(salience)

    def rewrite_gist(self, gist: str) -> None:
        """A gist someone wrote: no longer the one made from the content."""
        self.gist = gist
        self.gist_autogenerated = False

    def archive(self, reason: str | None, now: datetime) -> None:
        self.archived_at = now
        self.archive_reason = reason

    def unarchive(self) -> None:
        self.archived_at = None
        self.archive_reason = None

    def tracked_state(self) -> dict[str, Any]:
        """The fields a revision keeps, as JSON-ready values."""
        state = {name: getattr(self, name) for name in TRACKED_FIELDS}
        state["tags"] = _list_copy(self.tags)
        state["archived_at"] = isoformat(self.archived_at)
        return state

    def restore_tracked_state(self, state: dict[str, Any]) -> None:
        """Set the tracked fields back to a state `tracked_state` recorded."""
        for name in TRACKED_FIELDS:
            setattr(self, name, state[name])
        # As recorded: a revision taken before migrate may hold a drifted (non-list) value.
        self.tags = _list_copy(state["tags"])
        self.archived_at = parse_timestamp(state["archived_at"]) if state["archived_at"] else None

    def as_record(self) -> dict[str, Any]:
        """Every field of SPEC §2 except the owner, JSON-ready (recall replies, export)."""
        return {
            "id": str(self.id),
            "category": self.category,
            "content": self.content,
            "gist": self.gist,
            "gist_autogenerated": self.gist_autogenerated,
            "salience": self.salience,
            "core": self.core,
            "tags": _list_copy(self.tags),
            "search_keywords": _list_copy(self.search_keywords),
            "linked_memories": _list_copy(self.linked_memories),
            "conversation_url": self.conversation_url,
            "conversation_id": self.conversation_id,
            "transcript_ref": self.transcript_ref,
            "provenance": self.provenance,
            "epistemic_status": self.epistemic_status,
            "replication_count": self.replication_count,
            "compression_level": self.compression_level,
            "created_at": isoformat(self.created_at),
            "updated_at": isoformat(self.updated_at),
            "last_retrieved": isoformat(self.last_retrieved),
            "retrieval_count": self.retrieval_count,
            "archived_at": isoformat(self.archived_at),
            "archive_reason": self.archive_reason,
        }
