"""The recall index takes its new shape (SPEC §3.1): a ranking entry per live memory (an
integer id, what activation reads as numbers), a per-owner row (the profile that built
the index, the number of live memories), and tokens that point at entries.

The token rows are derived data: the old table goes, the new one starts empty, and 0004
fills everything for the default profile. Going back rebuilds the old tokens.
"""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

from memories.recall.ranking import SEED, index_entries, memory_terms


def _strings(values):
    if isinstance(values, str):
        return [values]
    if isinstance(values, list):
        return [v for v in values if isinstance(v, str)]
    return []


def seed_tokens_as_before(apps, schema_editor):
    """Back at 0002: every memory, archived or not, indexed with the seed rule."""
    Memory = apps.get_model("memories", "Memory")
    MemoryToken = apps.get_model("memories", "MemoryToken")
    rows = []
    for memory in Memory.objects.order_by("pk").iterator(chunk_size=500):
        terms = memory_terms(
            gist=memory.gist,
            content=memory.content,
            tags=_strings(memory.tags),
            search_keywords=_strings(memory.search_keywords),
            profile=SEED,
        )
        rows += [
            MemoryToken(memory_id=memory.pk, owner_id=memory.owner_id, key=k, in_keywords=kw)
            for k, kw in index_entries(terms).items()
        ]
        if len(rows) >= 5000:
            MemoryToken.objects.bulk_create(rows)
            rows = []
    MemoryToken.objects.bulk_create(rows)


class Migration(migrations.Migration):
    dependencies = [
        ("memories", "0002_remove_memory_memory_live_core_salience_and_more"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        # Runs last when this migration is undone, once the old table is back.
        migrations.RunPython(migrations.RunPython.noop, seed_tokens_as_before),
        migrations.DeleteModel(name="MemoryToken"),
        migrations.CreateModel(
            name="RecallEntry",
            fields=[
                ("id", models.BigAutoField(primary_key=True, serialize=False)),
                ("category", models.CharField(max_length=64)),
                ("salience", models.CharField(max_length=32)),
                ("retrieval_count", models.PositiveIntegerField()),
                ("last_retrieved_us", models.BigIntegerField(null=True)),
                ("created_us", models.BigIntegerField()),
                ("updated_us", models.BigIntegerField()),
                (
                    "memory",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="recall_entry",
                        to="memories.memory",
                    ),
                ),
                (
                    "owner",
                    models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={
                "indexes": [
                    models.Index(
                        fields=["owner", "category"], name="recallentry_owner_category"
                    )
                ],
            },
        ),
        migrations.CreateModel(
            name="RecallIndex",
            fields=[
                (
                    "owner",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        primary_key=True,
                        related_name="+",
                        serialize=False,
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                ("profile", models.CharField(max_length=16)),
                ("live_memories", models.PositiveIntegerField(default=0)),
            ],
        ),
        migrations.CreateModel(
            name="MemoryToken",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("key", models.CharField(max_length=64)),
                ("in_keywords", models.BooleanField()),
                (
                    "entry",
                    models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="tokens",
                        to="memories.recallentry",
                    ),
                ),
                (
                    "owner",
                    models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={
                "constraints": [
                    models.UniqueConstraint(
                        fields=("entry", "key"), name="memorytoken_unique_key"
                    )
                ],
                "indexes": [
                    models.Index(
                        fields=["owner", "key", "entry", "in_keywords"],
                        name="memorytoken_covering",
                    )
                ],
            },
        ),
    ]
