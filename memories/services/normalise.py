"""The one normalisation of SPEC §7, and `migrate`, which applies it to stored memories.

`normalise` repairs one memory in place (legacy categories, numeric salience, list
fields, auto-gist, defaults) and never touches content or updated_at. Migrate and import
both call it; `normalise_stored` is the bulk pass over a user's stored memories they share.
"""

import copy
import re
import uuid
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction

from memories.bulkwrite import WRITE_BATCH, update_rows
from memories.conf import embedder
from memories.jsonutil import json_list
from memories.limits import MAX_GIST
from memories.models import (
    ChangeSource,
    EpistemicStatus,
    Memory,
    RecallIndex,
    Salience,
    Snapshot,
    User,
)
from memories.recall.indexing import Vectors, normalised_hash, refresh_hashes
from memories.services._common import now_or, record_revisions, reindex_in_batches
from memories.services.snapshots import keep_values, take_snapshot
from memories.services.unit_of_work import embed_ahead
from memories.vocabulary import (
    EPISTEMIC_VALUES,
    NUMERIC_SALIENCE,
    SALIENCE_VALUES,
    home_category,
    last_touch_of,
    whole_number,
)

AUTO_GIST_WORDS = 15
ELLIPSIS = "…"
# A sentence ends at . ! or ? followed by white space.
_SENTENCE_END = re.compile(r"[.!?](?=\s)")
LIST_FIELDS = ("tags", "search_keywords", "linked_memories")
# Changes to these make the recall index stale.
INDEXED_FIELDS = frozenset({"gist", *LIST_FIELDS})
# Memories read at once (content left out) when looking for drift.
SURVEY_BATCH = 2000


def auto_gist(content: str) -> str:
    """The first sentence of the content, cut to its first 15 words (with … if longer)."""
    end = _SENTENCE_END.search(content)
    sentence = content[: end.end()] if end else content
    words = sentence.split()
    gist = " ".join(words[:AUTO_GIST_WORDS])
    if len(words) > AUTO_GIST_WORDS:
        gist += ELLIPSIS
    if len(gist) > MAX_GIST:
        # Only a run of very long "words" gets here; a gist must still fit on one line.
        gist = gist[: MAX_GIST - 1].rstrip() + ELLIPSIS
    return gist


def normalise_salience(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    folded = value.strip().lower() if isinstance(value, str) else ""
    if folded in SALIENCE_VALUES:
        return folded
    if folded in NUMERIC_SALIENCE:
        return NUMERIC_SALIENCE[folded]
    return Salience.MEDIUM.value


def normalise_epistemic_status(value: Any) -> str:
    folded = value.strip().lower() if isinstance(value, str) else ""
    return folded if folded in EPISTEMIC_VALUES else EpistemicStatus.UNVALIDATED.value


def normalise_list(value: Any) -> list[str]:
    """A JSON array string is parsed, any other non-blank string is one item, and only
    string items are kept."""
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return []
        items: Any = json_list(text)
        if items is None:
            items = [value]
    elif isinstance(value, list | tuple):
        items = value
    else:
        items = []
    return [item for item in items if isinstance(item, str)]


# The largest count every supported database stores (a 32-bit integer column).
MAX_COUNT = 2**31 - 1


def _count(value: Any) -> int:
    """A whole number from 0 to MAX_COUNT; anything else gets the default, 0."""
    if isinstance(value, str):
        value = whole_number(value)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_COUNT:
        return value
    return 0


def _wanted_without_content(memory: Memory) -> dict[str, Any]:
    """The normal values of the fields whose repair does not read the content."""
    wanted: dict[str, Any] = {
        "category": home_category(memory.category),
        "salience": normalise_salience(memory.salience),
        "epistemic_status": normalise_epistemic_status(memory.epistemic_status),
        "replication_count": _count(memory.replication_count),
        "compression_level": _count(memory.compression_level),
        "retrieval_count": _count(memory.retrieval_count),
    }
    for name in LIST_FIELDS:
        wanted[name] = normalise_list(getattr(memory, name))
    if memory.created_at is None:
        wanted["created_at"] = memory.updated_at
    wanted["last_touched_at"] = last_touch_of(memory.updated_at, memory.last_retrieved)
    return wanted


def _gist_missing(memory: Memory) -> bool:
    return not isinstance(memory.gist, str) or not memory.gist.strip()


def normalise(memory: Memory) -> list[str]:
    """Repair one memory in place; return the names of the fields that changed.

    Content and updated_at are never touched. The memory is not saved.
    """
    wanted = _wanted_without_content(memory)
    if _gist_missing(memory):
        wanted["gist"] = auto_gist(memory.content)
        wanted["gist_autogenerated"] = True
    changed = [name for name, value in wanted.items() if getattr(memory, name) != value]
    for name in changed:
        setattr(memory, name, wanted[name])
    gist_hash, content_hash = memory.gist_hash, memory.content_hash
    refresh_hashes(memory)
    if memory.gist_hash != gist_hash:
        changed.append("gist_hash")
    if memory.content_hash != content_hash:
        changed.append("content_hash")
    return changed


def may_need_normalising(memory: Memory) -> bool:
    """Whether `normalise` could change this memory, judged without reading its content
    (load it with the content deferred): True for every memory it would change."""
    if _gist_missing(memory) or memory.gist_hash != normalised_hash(memory.gist):
        return True
    wanted = _wanted_without_content(memory)
    if any(getattr(memory, name) != value for name, value in wanted.items()):
        return True
    # Every write of content writes its hash too, so a stale hash is a blank one (it is
    # also blank, and rightly so, for content without a word; normalise decides those).
    return not memory.content_hash


@dataclass
class Change:
    memory: Memory
    original: Memory  # a copy as stored, for the snapshot and the revision
    fields: list[str]


def find_changes(memories: Iterable[Memory]) -> list[Change]:
    changes = []
    for memory in memories:
        original = copy.copy(memory)
        fields = normalise(memory)
        if fields:
            changes.append(Change(memory=memory, original=original, fields=fields))
    return changes


def write_changes(
    changes: list[Change], *, source: str, now: datetime, vectors: Vectors | None = None
) -> None:
    """Save normalised memories in bulk, keep revisions, and re-index what recall reads
    (`vectors`: those embedded ahead, outside the transaction)."""
    if not changes:
        return
    fields = sorted({name for change in changes for name in change.fields})
    update_rows([c.memory for c in changes], fields)
    record_revisions(
        [(c.memory, c.original.tracked_state()) for c in changes],
        source=source,
        action="normalise",
        now=now,
    )
    text_changed: list[Memory] = []
    # The others changed only what activation reads (category, salience, counts, times).
    others: list[Memory] = []
    for change in changes:
        (text_changed if INDEXED_FIELDS.intersection(change.fields) else others).append(
            change.memory
        )
    reindex_in_batches(text_changed, vectors=vectors)
    reindex_in_batches(others, text_changed=False)


@dataclass
class OwnerResult:
    total: int
    migrated: int
    counts_before: Counter[str]
    counts_after: Counter[str]
    snapshot_id: int | None


@dataclass
class Survey:
    """What a read of one owner's memories, content left out, found."""

    total: int = 0
    counts_before: Counter[str] = field(default_factory=Counter)
    counts_after: Counter[str] = field(default_factory=Counter)
    # The memories normalisation may change, in primary-key order.
    candidates: list[uuid.UUID] = field(default_factory=list)


def survey(owner_id: int) -> Survey:
    """Read every memory of one owner but its content, in batches, and note the ones that
    may need normalising. Reads only: a store with nothing to repair is never locked."""
    found = Survey()
    memories = Memory.objects.filter(owner_id=owner_id).defer("content").order_by("pk")
    last: uuid.UUID | None = None
    while True:
        page = memories.filter(pk__gt=last) if last is not None else memories
        batch = list(page[:SURVEY_BATCH])
        if not batch:
            return found
        for memory in batch:
            found.total += 1
            found.counts_before[memory.category] += 1
            found.counts_after[home_category(memory.category)] += 1
            if may_need_normalising(memory):
                found.candidates.append(memory.pk)
        last = batch[-1].pk


def normalise_stored(
    owner_id: int,
    *,
    source: str,
    now: datetime,
    dry_run: bool = False,
    snapshot_reason: str | None = "before-migrate",
    keep_in: Snapshot | None = None,
) -> OwnerResult:
    """Normalise every stored memory of one owner.

    A read of every memory but its content finds the ones that may need it; only those
    are loaded whole, in batches, and only the ones that change are written, in one
    transaction (none when nothing changes or on a dry run). With a snapshot_reason, the
    affected records are snapshotted in that transaction before they change.
    """
    found = survey(owner_id)
    changes: list[Change] = []
    snapshot_id = None
    if dry_run:
        for chunk in _chunks(found.candidates):
            rows = Memory.objects.filter(owner_id=owner_id, pk__in=chunk).order_by("pk")
            changes += find_changes(rows)
    elif found.candidates:
        ahead = _embed_ahead(owner_id, found.candidates)
        with transaction.atomic():
            for chunk in _chunks(found.candidates):
                rows = Memory.objects.filter(owner_id=owner_id, pk__in=chunk).order_by("pk")
                changes += find_changes(rows.select_for_update())
            if changes and keep_in is not None:
                keep_values(keep_in, memories=[c.original for c in changes])
            elif changes and snapshot_reason is not None:
                snapshot = take_snapshot(
                    owner_id=owner_id,
                    reason=snapshot_reason,
                    memories=[c.original for c in changes],
                    now=now,
                )
                snapshot_id = snapshot.pk
            write_changes(changes, source=source, now=now, vectors=ahead)
    return OwnerResult(
        total=found.total,
        migrated=len(changes),
        counts_before=found.counts_before,
        counts_after=found.counts_after,
        snapshot_id=snapshot_id,
    )


def normalise_if_drifted(owner_id: int, *, source: str, now: datetime, keep_in: Snapshot) -> int:
    """normalise_stored for an import: skipped (0) when the owner's store is known to be
    normalised already, so a small import into a large store does not read all of it;
    else how many records were normalised, kept as they were in `keep_in`."""
    if RecallIndex.objects.filter(owner_id=owner_id, normalised=True).exists():
        return 0
    migrated = normalise_stored(
        owner_id, source=source, now=now, snapshot_reason=None, keep_in=keep_in
    ).migrated
    # Read whole and repaired: the import writes anyway, so noting it costs no lock that
    # a read-only migrate would otherwise take.
    RecallIndex.objects.filter(owner_id=owner_id).update(normalised=True)
    return migrated


def _embed_ahead(owner_id: int, candidates: list[uuid.UUID]) -> Vectors | None:
    """The vectors of the memories whose text normalising will change (a gist made, lists
    parsed), embedded before the write transaction from copies read without a lock."""
    if embedder() is None:
        return None
    changed: list[Memory] = []
    for chunk in _chunks(candidates):
        rows = Memory.objects.filter(owner_id=owner_id, pk__in=chunk).order_by("pk")
        changed += [c.memory for c in find_changes(rows) if INDEXED_FIELDS.intersection(c.fields)]
    return embed_ahead(changed)


def _chunks(ids: list[uuid.UUID]) -> Iterator[list[uuid.UUID]]:
    for start in range(0, len(ids), WRITE_BATCH):
        yield ids[start : start + WRITE_BATCH]


@dataclass(frozen=True)
class OwnerMigrated:
    """What migrate did to one user's store."""

    username: str
    migrated: int
    total: int
    snapshot_id: int | None  # the records as they were, or None when nothing changed


@dataclass(frozen=True)
class Migrated:
    """What migrate did (or, with dry_run, would do), user by user."""

    dry_run: bool
    owners: tuple[OwnerMigrated, ...]
    counts_before: dict[str, int]  # memories per category, sorted by category
    counts_after: dict[str, int]

    @property
    def migrated(self) -> int:
        return sum(o.migrated for o in self.owners)

    @property
    def total(self) -> int:
        return sum(o.total for o in self.owners)

    @property
    def snapshot_ids(self) -> list[int]:
        return [o.snapshot_id for o in self.owners if o.snapshot_id is not None]

    @property
    def message(self) -> str:
        """What happened, in a sentence for the operator's tools and the migrate tool."""
        if self.dry_run:
            return (
                f"Dry run: {self.migrated} of {self.total} memories would be normalised. "
                "Nothing was changed and no snapshot was written."
            )
        if self.migrated:
            return (
                f"Normalised {self.migrated} of {self.total} memories; the records as they "
                "were are kept in a snapshot. Content and updated_at were left as they were."
            )
        return (
            f"All {self.total} memories were already normalised: nothing changed and no "
            "snapshot was written."
        )


def migrate(
    *, owner: User | None = None, dry_run: bool = False, now: datetime | None = None
) -> Migrated:
    """Normalise the stored memories of one owner, or of every user when owner is None.

    Idempotent: a run after a run changes nothing and writes no snapshot. Each owner's
    changes are one transaction.
    """
    now = now_or(now)
    if owner is not None:
        owner_ids = [owner.pk]
    else:
        owner_ids = list(
            Memory.objects.order_by("owner_id").values_list("owner_id", flat=True).distinct()
        )
    results = {
        owner_id: normalise_stored(owner_id, source=ChangeSource.MIGRATE, now=now, dry_run=dry_run)
        for owner_id in owner_ids
    }
    if owner is not None:
        usernames = {owner.pk: owner.get_username()}
    else:
        users = get_user_model().objects.filter(pk__in=results)
        usernames = dict(users.values_list("pk", "username"))
    before: Counter[str] = Counter()
    after: Counter[str] = Counter()
    for result in results.values():
        before.update(result.counts_before)
        after.update(result.counts_after)
    return Migrated(
        dry_run=dry_run,
        owners=tuple(
            OwnerMigrated(
                username=usernames.get(owner_id, str(owner_id)),
                migrated=result.migrated,
                total=result.total,
                snapshot_id=result.snapshot_id,
            )
            for owner_id, result in results.items()
        ),
        counts_before=dict(sorted(before.items())),
        counts_after=dict(sorted(after.items())),
    )
