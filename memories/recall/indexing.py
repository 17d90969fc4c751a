"""Write-time bookkeeping that recall and the duplicate warning read: the token index, the
ranking entries and per-owner counts of the recall index, tag rows and normalised hashes.

Every write path that changes a memory's text, tags or keywords, its archive state, or
what activation reads (salience, category, times, retrieval count) calls `reindex`;
one that deletes a live memory calls `unindex` first. Only live memories have tokens and
a ranking entry, so counting them gives N and the document frequencies exactly.
"""

import hashlib
import random
import re
import sys
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import partial

from django.db import DatabaseError, IntegrityError, connection, transaction
from django.db.models import QuerySet

from memories.bulkwrite import INSERT_BATCH, insert_rows, update_rows
from memories.conf import embedder, ranking_profile
from memories.maintenance import analyze_after_growth
from memories.models import (
    IndexChange,
    Memory,
    MemoryTag,
    MemoryToken,
    MemoryVector,
    RecallEntry,
    RecallIndex,
    User,
)
from memories.recall.embedding import Embedder, EmbedderUnavailable, Vector
from memories.recall.ranking import Profile, index_entries, index_key, memory_terms, parse_query
from memories.recall.semantic import memory_text, stored
from memories.timeutil import micros

_NOT_WORD = re.compile(r"[\W_]+")


@dataclass(frozen=True)
class Vectors:
    """Vectors computed ahead of a write, by the text embedded (so a memory given a new id
    on the way, as import may do, still finds its own)."""

    embedder: Embedder
    by_text: dict[str, Vector | None]


# The fields the token index, the tag rows and the vectors are made from.
INDEXED_TEXT = frozenset({"gist", "content", "tags", "search_keywords"})


def normalised_hash(text: str | None) -> str:
    """Hash of the text case-folded with whitespace and punctuation collapsed."""
    folded = _NOT_WORD.sub(" ", (text or "").casefold()).strip()
    if not folded:
        return ""
    return hashlib.sha256(folded.encode()).hexdigest()


def tag_key(tag: str) -> str:
    return index_key(tag.strip().casefold())


def query_keys(query: str | None) -> list[str]:
    """The distinct index keys of a query under the active profile (empty when blank)."""
    return list(parse_query(query, ranking_profile()).tokens)


def refresh_hashes(memory: Memory) -> None:
    memory.gist_hash = normalised_hash(memory.gist)
    memory.content_hash = normalised_hash(memory.content)


def string_items(values: object) -> list[str]:
    # Drifted records may hold a bare string or mixed items until migrate repairs them.
    if isinstance(values, str):
        return [values]
    if isinstance(values, list):
        return [v for v in values if isinstance(v, str)]
    return []


def token_entries(memory: Memory, profile: Profile) -> dict[str, bool]:
    """Index key → whether it is a keyword token, for a live memory under this profile."""
    terms = memory_terms(
        gist=memory.gist,
        content=memory.content,
        tags=string_items(memory.tags),
        search_keywords=string_items(memory.search_keywords),
        profile=profile,
    )
    return index_entries(terms)


def tag_keys(memory: Memory) -> set[str]:
    return {tag_key(tag) for tag in string_items(memory.tags) if tag.strip()}


def recall_entry(memory: Memory, entry_id: int | None = None) -> RecallEntry:
    return RecallEntry(
        id=entry_id,
        memory_id=memory.pk,
        owner_id=memory.owner_id,
        category=memory.category,
        salience=memory.salience,
        retrieval_count=memory.retrieval_count,
        last_retrieved_us=micros(memory.last_retrieved) if memory.last_retrieved else None,
        created_us=micros(memory.created_at),
        updated_us=micros(memory.updated_at),
    )


ENTRY_FIELDS = (
    "category",
    "salience",
    "retrieval_count",
    "last_retrieved_us",
    "created_us",
    "updated_us",
)


def embedding_text(memory: Memory) -> str:
    return memory_text(
        gist=memory.gist or "",
        content=memory.content or "",
        tags=string_items(memory.tags),
        keywords=string_items(memory.search_keywords),
    )


def vectors_for(memories: Iterable[Memory]) -> Vectors | None:
    """The vectors of these memories by the active embedder, for `reindex`: computed before
    a write transaction begins, so that SQLite's write lock is not held while embedding.
    None when recall does not use meaning."""
    semantic = embedder()
    if semantic is None:
        return None
    return _embedded(semantic, {embedding_text(m) for m in memories})


def _embedded(semantic: Embedder, texts: set[str]) -> Vectors:
    # Longest first, so each batch of the model pads its texts to about the same length.
    ordered = sorted(texts, key=lambda text: (-len(text), text))
    return Vectors(semantic, dict(zip(ordered, semantic.embed(ordered), strict=True)))


def reindex(
    memories: Iterable[Memory],
    *,
    text_changed: bool = True,
    new: bool = False,
    vectors: Vectors | None = None,
) -> None:
    """Bring the index rows of these saved memories up to date.

    Tag rows and vectors always; a ranking entry and tokens only while a memory is live
    (an entry keeps its id while the memory stays live). With `text_changed=False` (only
    salience, times or the archive state moved) tag rows, vectors and the tokens of
    memories that stay live are left alone. `new=True` says the memories were just
    created: nothing to replace. `vectors` (from `vectors_for`, before the transaction)
    saves embedding here; a memory whose text changed since is embedded again.
    """
    batch = list(memories)
    if not batch:
        return
    profile = ranking_profile()
    ids = [m.pk for m in batch]
    entries: dict[uuid.UUID, int] = {}
    if not new:
        entries = dict(RecallEntry.objects.filter(memory_id__in=ids).values_list("memory", "pk"))
    live = [m for m in batch if m.archived_at is None]
    staying = [recall_entry(m, entries[m.pk]) for m in live if m.pk in entries]
    # Archived since: the entry goes, and its tokens with it.
    gone = [entries[m.pk] for m in batch if m.archived_at is not None and m.pk in entries]
    if gone:
        RecallEntry.objects.filter(pk__in=gone).delete()
    update_rows(staying, ENTRY_FIELDS)
    arriving = RecallEntry.objects.bulk_create(
        [recall_entry(m) for m in live if m.pk not in entries], batch_size=INSERT_BATCH
    )
    tokenised = arriving
    if text_changed:
        if staying:
            MemoryToken.objects.filter(entry__in=[e.pk for e in staying]).delete()
        tokenised = staying + arriving
        if not new:
            MemoryTag.objects.filter(memory_id__in=ids).delete()
        insert_rows(
            MemoryTag,
            ["memory", "owner", "key"],
            [(m.pk, m.owner_id, key) for m in batch for key in tag_keys(m)],
        )
    by_id = {m.pk: m for m in live}
    insert_rows(
        MemoryToken,
        ["entry", "owner", "key", "in_keywords"],
        [
            (entry.pk, entry.owner_id, key, in_keywords)
            for entry in tokenised
            for key, in_keywords in token_entries(by_id[entry.memory_id], profile).items()
        ],
    )
    change: dict[int, int] = {m.owner_id: 0 for m in batch}
    # The entries this write changed (their tokens, or what ranking reads of them), by
    # owner: a worker's held postings and salience follow them (memories.recall.postings).
    touched: dict[int, list[int]] = defaultdict(list)
    for entry in [*staying, *arriving]:
        touched[entry.owner_id].append(entry.pk)
    for entry in arriving:
        change[entry.owner_id] += 1
    for memory in batch:
        if memory.archived_at is not None and memory.pk in entries:
            change[memory.owner_id] -= 1
            touched[memory.owner_id].append(entries[memory.pk])
    versions = _count_live(change, profile, touched)
    if text_changed:
        _store_vectors(batch, vectors, versions, new=new)


def _store_vectors(
    batch: Sequence[Memory], vectors: Vectors | None, versions: dict[int, int], *, new: bool
) -> None:
    semantic = embedder()
    if semantic is None:
        return
    known = vectors.by_text if vectors is not None and vectors.embedder is semantic else {}
    texts = {m.pk: embedding_text(m) for m in batch}
    # Not embedded beforehand, or changed since: embedded here.
    missing = {text for text in texts.values() if text not in known}
    if missing:
        known = {**known, **_embedded(semantic, missing).by_text}
    if not new:
        MemoryVector.objects.filter(memory_id__in=list(texts)).delete()
    insert_rows(
        MemoryVector,
        ["memory", "owner", "embedder", "dimension", "vector", "version"],
        [
            (
                m.pk,
                m.owner_id,
                semantic.name,
                semantic.dimension,
                stored(known[texts[m.pk]]),
                versions[m.owner_id],
            )
            for m in batch
        ],
    )


def unindex(ids: Sequence[uuid.UUID]) -> None:
    """Take these memories out of the recall index before they are deleted."""
    entries = RecallEntry.objects.filter(memory_id__in=ids)
    change: dict[int, int] = defaultdict(int)
    touched: dict[int, list[int]] = defaultdict(list)
    for owner_id, entry_id in entries.values_list("owner_id", "pk"):
        change[owner_id] -= 1
        touched[owner_id].append(entry_id)
    entries.delete()
    _count_live(change, ranking_profile(), touched)


def _count_live(
    change: dict[int, int], profile: Profile, touched: dict[int, list[int]]
) -> dict[int, int]:
    """Apply changes in the number of live memories to each owner's RecallIndex row and move
    its version (every write does), recording the entries it changed (`touched`, by
    owner) at the new version; the owners' versions now."""
    versions: dict[int, int] = {}
    for owner_id, delta in change.items():
        bumped = _bump(owner_id, delta)
        if bumped is not None:
            analyze_after_growth(bumped[1] - delta, bumped[1])
        else:
            # The owner's first write: the row starts at the count now stored.
            try:
                with transaction.atomic():
                    created = RecallIndex.objects.create(
                        owner_id=owner_id,
                        profile=profile.name,
                        live_memories=RecallEntry.objects.filter(owner_id=owner_id).count(),
                        version=1,
                    )
                bumped = (1, created.live_memories)
                analyze_after_growth(0, created.live_memories)
            except IntegrityError:
                # Another transaction made the row first; its count could not see ours.
                bumped = _bump(owner_id, delta)
        versions[owner_id] = bumped[0] if bumped else 0
        if bumped:
            _record_change(owner_id, bumped[0], touched.get(owner_id, []))
    return versions


# How many of an owner's latest versions keep their IndexChange rows: a worker whose held
# postings are older reads their words again (memories.recall.postings). Older rows go
# every PRUNE_EVERY versions, so that most writes add one statement, not two.
KEEP_CHANGES = 512
PRUNE_EVERY = 32


def _record_change(owner_id: int, version: int, entries: Sequence[int]) -> None:
    """Record that the owner's index moved to `version` changing these entries (a row
    without an entry when it changed none, so that every version has a row)."""
    insert_rows(
        IndexChange,
        ["owner", "version", "entry"],
        [(owner_id, version, entry) for entry in sorted(set(entries))]
        or [(owner_id, version, None)],
    )
    if version % PRUNE_EVERY == 0:
        IndexChange.objects.filter(owner_id=owner_id, version__lte=version - KEEP_CHANGES).delete()


def _bump(owner_id: int, delta: int) -> tuple[int, int] | None:
    """Add `delta` to the owner's live count and move the version; the new version and
    count, or None when the owner has no row yet."""
    table = connection.ops.quote_name(RecallIndex._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} SET live_memories = live_memories + %s, version = version + 1"
            " WHERE owner_id = %s RETURNING version, live_memories",
            [delta, owner_id],
        )
        row = cursor.fetchone()
    return (int(row[0]), int(row[1])) if row else None


# Memories per rebuild transaction. A batch holds its memories' locks until it commits,
# and from its count update on the owner's RecallIndex row, which every write of the
# owner's takes: the longer a batch, the longer a live write may wait. At 100 a batch
# writes in about 50 ms on PostgreSQL (190 ms at 500), while a whole rebuild takes about
# 1.4 times as long as at 500 (the statements and commit each batch costs).
REBUILD_BATCH = 100
# Runs of a batch the database ended to break a deadlock (or a serialization failure),
# each after a short pause that grows and is jittered, so that the two do not meet again.
BATCH_ATTEMPTS = 5
_PAUSE = 0.05


def rebuild(
    owner: User,
    *,
    batch_size: int = REBUILD_BATCH,
    advance: Callable[[int], object] | None = None,
) -> int:
    """Rebuild the owner's whole recall index for the active profile, one transaction per
    batch of memories, and record the profile. Running it twice changes nothing; running
    it while the owner writes is safe.

    The locks are taken in the writes' order: the memories first (one, or several in id
    order as recall's strengthening and a restore take them), then their recall entries,
    tokens and tag rows, then the owner's RecallIndex row (the count), then their vectors.
    So a batch and a write wait for each other's memories but never crosswise, and a
    memory archived or edited while the batch waited is indexed as it now stands. A batch
    the database ends anyway runs again (`atomic_retrying`).

    `advance(n)` is told after each batch how many memories it held. Returns how many
    memories were indexed.
    """
    profile = ranking_profile()
    memories = Memory.objects.for_owner(owner).order_by("pk")
    done = 0
    last: uuid.UUID | None = None
    while True:
        page = memories.filter(pk__gt=last) if last is not None else memories
        # Embedded before the batch's write transaction, from the rows read without a lock
        # (`reindex` embeds again a memory whose text changed in between).
        ahead = vectors_for(page[:batch_size])
        batch = atomic_retrying(partial(_index_batch, page, batch_size, ahead))
        if not batch:
            break
        last = batch[-1].pk
        done += len(batch)
        if advance is not None:
            advance(len(batch))
    _record_rebuilt(owner, profile)
    return done


def _index_batch(page: QuerySet[Memory], size: int, ahead: Vectors | None) -> list[Memory]:
    """The next `size` memories of the page, locked in id order before any of their index
    rows is touched, and indexed."""
    batch = list(page.select_for_update()[:size])
    reindex(batch, vectors=ahead)
    return batch


def _record_rebuilt(owner: User, profile: Profile) -> None:
    """Record the profile the owner's index was built for, and count its live memories
    under the lock of its RecallIndex row: a write moves the count under that lock too, so
    one that took it first has committed and is counted here, and one that takes it after
    adds its change to this count."""
    with transaction.atomic():
        index, _ = RecallIndex.objects.select_for_update().get_or_create(
            owner=owner, defaults={"profile": profile.name}
        )
        index.profile = profile.name
        index.live_memories = RecallEntry.objects.filter(owner=owner).count()
        index.save(update_fields=["profile", "live_memories"])


def atomic_retrying[T](write: Callable[[], T]) -> T:
    """Run `write` in a transaction of its own, and again, after a short pause, when the
    database ends that transaction to break a deadlock or a serialization failure (up to
    BATCH_ATTEMPTS runs in all); any other error surfaces at once."""
    attempt = 1
    while True:
        try:
            with transaction.atomic():
                return write()
        except DatabaseError as error:
            if attempt == BATCH_ATTEMPTS or not lost_to_another_transaction(error):
                raise
        time.sleep(_PAUSE * attempt * random.uniform(0.5, 1.5))
        attempt += 1


def lost_to_another_transaction(error: DatabaseError) -> bool:
    """Whether the database ended the transaction to let another one through (psycopg's
    error, wrapped by Django's): running it again may well succeed. Only PostgreSQL's
    backend loads psycopg: where it never did, the error is not one of those."""
    errors = sys.modules.get("psycopg.errors")
    return errors is not None and isinstance(
        error.__cause__, (errors.DeadlockDetected, errors.SerializationFailure)
    )


def index_mismatch() -> str | None:
    """Why the stored recall index cannot serve the active profile, or None when it can."""
    active = ranking_profile().name
    stale = RecallIndex.objects.exclude(profile=active)
    built_for = stale.values_list("profile", flat=True).first()
    if built_for is None:
        return None
    return (
        f"The recall index of {stale.count()} account(s) was built for the {built_for!r} "
        f"relevance profile, but TAPROOT_RANKING is {active!r}. Rebuild it with "
        "`python manage.py reindex_taproot` (or set TAPROOT_RANKING back), then start again."
    )


def embedder_problem(setting: str) -> str | None:
    """Why the embedder TAPROOT_EMBEDDER names (`setting`) cannot serve recall, or None when
    it can: it cannot load, or stored vectors were made by another embedder (their
    cosines with its queries would mean nothing)."""
    try:
        semantic = embedder()
    except EmbedderUnavailable as error:
        return str(error)
    if semantic is None:
        return None
    stale = MemoryVector.objects.exclude(embedder=semantic.name).order_by()
    made_by = stale.values_list("embedder", flat=True)[:1]
    if not made_by:
        return None
    accounts = stale.values("owner").distinct().count()
    return (
        f"The memory vectors of {accounts} account(s) were made by the {made_by[0]!r} "
        f"embedder, but TAPROOT_EMBEDDER={setting} makes {semantic.name!r} ones. Rebuild "
        "them with `python manage.py reindex_taproot` (or set TAPROOT_EMBEDDER back), then "
        "start again."
    )
