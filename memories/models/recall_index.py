"""The recall index (SPEC §3): what ranking reads about each live memory, as numbers,
tokens, tags and vectors, kept by memories.recall.indexing beside the memory rows."""

import uuid

from django.conf import settings
from django.db import models


class RecallEntry(models.Model):
    """What activation reads about one live memory, as numbers, so that recall scores in
    SQL without touching the wide memory rows. Times are microseconds since the epoch:
    SQLite has no exact date arithmetic. The integer id keeps the token index small and
    its join a plain integer lookup."""

    id = models.BigAutoField(primary_key=True)
    memory = models.OneToOneField(
        "memories.Memory", on_delete=models.CASCADE, related_name="recall_entry"
    )
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+", db_index=False
    )
    category = models.CharField(max_length=64)
    salience = models.CharField(max_length=32)
    retrieval_count = models.PositiveIntegerField()
    last_retrieved_us = models.BigIntegerField(null=True)
    created_us = models.BigIntegerField()
    updated_us = models.BigIntegerField()

    class Meta:
        indexes = [models.Index(fields=["owner", "category"], name="recallentry_owner_category")]

    def __str__(self) -> str:
        return str(self.memory_id)


class MemoryToken(models.Model):
    """The recall index: one row per distinct token of a live memory (SPEC §3), in the
    active relevance profile's tokens. Archived memories have none, so counting a key's
    rows gives its document frequency among live memories."""

    entry = models.ForeignKey(
        RecallEntry, on_delete=models.CASCADE, related_name="tokens", db_index=False
    )
    # Denormalised so the lookup index starts with the owner.
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+", db_index=False
    )
    key = models.CharField(max_length=64)
    in_keywords = models.BooleanField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["entry", "key"], name="memorytoken_unique_key"),
        ]
        indexes = [
            # Covers the scoring query and the document-frequency count: both read only
            # these columns (SQLite ignores INCLUDE, so they are all key columns). In
            # impact order: a word's keyword postings apart from its content-only ones,
            # so that recall reads only the classes that can place (memories.recall.impact).
            models.Index(fields=["owner", "key", "in_keywords", "entry"], name="memorytoken_impact")
        ]

    def __str__(self) -> str:
        return self.key


class RecallIndex(models.Model):
    """One owner's recall index as a whole: the relevance profile that built it and N,
    the owner's live memories (the IDF weights need it on every query)."""

    owner = models.OneToOneField(
        settings.AUTH_USER_MODEL, primary_key=True, on_delete=models.CASCADE, related_name="+"
    )
    profile = models.CharField(max_length=16)
    live_memories = models.PositiveIntegerField(default=0)
    # Moves on every write to the owner's index: a worker's cached vectors are stale
    # when theirs is older (memories.recall.semantic). A new row (a store rebuilt, a database
    # restored from elsewhere) has a new generation, so no cache mistakes it for the old.
    version = models.BigIntegerField(default=0)
    generation = models.UUIDField(default=uuid.uuid4)
    # The owner's store was read whole and found (or made) normalised, and has since
    # been written only by code that normalises what it writes: an import need not read
    # the whole store again to look for drift (memories.services.normalise). A restore,
    # which writes records back as they were, drift included, clears it.
    normalised = models.BooleanField(default=False)

    def __str__(self) -> str:
        return f"{self.profile}: {self.live_memories} live memories"


class IndexChange(models.Model):
    """A write to an owner's recall index: the version it moved the index to, and one
    entry it wrote, changed or took away (a row without an entry when it changed none).
    A worker holding words' postings and entries' salience brings them up to the index's
    version from these instead of reading them again (memories.recall.postings); only an
    owner's latest versions are kept (memories.recall.indexing, KEEP_CHANGES)."""

    id = models.BigAutoField(primary_key=True)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+", db_index=False
    )
    version = models.BigIntegerField()
    # Not a foreign key: the entry of a memory archived or deleted is gone.
    entry = models.BigIntegerField(null=True)

    class Meta:
        indexes = [
            models.Index(fields=["owner", "version", "entry"], name="indexchange_owner_version")
        ]

    def __str__(self) -> str:
        return f"version {self.version}: entry {self.entry}"


class MemoryVector(models.Model):
    """A memory's meaning as a unit vector (SPEC §3.2): of its gist, keywords, tags and
    content, by the embedder named, as float16 bytes (memories.recall.embedding). `version` is
    the owner's RecallIndex.version when it was written, so a cache takes only newer
    ones. A memory whose text has no token has none."""

    memory = models.OneToOneField(
        "memories.Memory", primary_key=True, on_delete=models.CASCADE, related_name="vector"
    )
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+", db_index=False
    )
    embedder = models.CharField(max_length=64)
    dimension = models.PositiveIntegerField()
    vector = models.BinaryField()
    version = models.BigIntegerField()

    class Meta:
        indexes = [models.Index(fields=["owner", "version"], name="memoryvector_owner_version")]

    def __str__(self) -> str:
        return f"{self.embedder} ({self.dimension})"


class MemoryTag(models.Model):
    """Tags as rows (trimmed and case-folded), so tag filters work on every backend."""

    memory = models.ForeignKey("memories.Memory", on_delete=models.CASCADE, related_name="tag_rows")
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+", db_index=False
    )
    key = models.CharField(max_length=64)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["memory", "key"], name="memorytag_unique_key"),
        ]
        indexes = [models.Index(fields=["owner", "key"], name="memorytag_owner_key")]

    def __str__(self) -> str:
        return self.key
