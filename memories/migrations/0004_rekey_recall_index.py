"""Re-key every store for the taproot relevance profile (SPEC §3.1).

Tokens become the new profile's (Unicode words, stop words out, Snowball stems), only
live memories keep them, each live memory gets its ranking entry, and each owner a
RecallIndex row recording the profile and the number of live memories. Undoing it puts
back the seed profile's tokens on every memory, as 0002 left them.
"""

from datetime import UTC, datetime, timedelta

from django.db import migrations
from django.db.models import Count

from memories.ranking import SEED, TAPROOT, index_entries, memory_terms

BATCH = 500
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _micros(moment):
    return (moment - _EPOCH) // timedelta(microseconds=1)


def _strings(values):
    if isinstance(values, str):
        return [values]
    if isinstance(values, list):
        return [v for v in values if isinstance(v, str)]
    return []


def _rebuild(apps, profile, *, live_only):
    Memory = apps.get_model("memories", "Memory")
    MemoryToken = apps.get_model("memories", "MemoryToken")
    RecallEntry = apps.get_model("memories", "RecallEntry")
    RecallIndex = apps.get_model("memories", "RecallIndex")
    MemoryToken.objects.all().delete()
    RecallEntry.objects.all().delete()
    RecallIndex.objects.all().delete()
    memories = Memory.objects.order_by("pk")
    if live_only:
        memories = memories.filter(archived_at__isnull=True)
    last = None
    while True:
        batch = list((memories.filter(pk__gt=last) if last else memories)[:BATCH])
        if not batch:
            break
        last = batch[-1].pk
        tokens, entries = [], []
        for memory in batch:
            terms = memory_terms(
                gist=memory.gist,
                content=memory.content,
                tags=_strings(memory.tags),
                search_keywords=_strings(memory.search_keywords),
                profile=profile,
            )
            tokens += [
                MemoryToken(memory_id=memory.pk, owner_id=memory.owner_id, key=k, in_keywords=kw)
                for k, kw in index_entries(terms).items()
            ]
            if live_only:
                entries.append(
                    RecallEntry(
                        memory_id=memory.pk,
                        owner_id=memory.owner_id,
                        category=memory.category,
                        salience=memory.salience,
                        retrieval_count=memory.retrieval_count,
                        last_retrieved_us=(
                            _micros(memory.last_retrieved) if memory.last_retrieved else None
                        ),
                        created_us=_micros(memory.created_at),
                        updated_us=_micros(memory.updated_at),
                    )
                )
        MemoryToken.objects.bulk_create(tokens, batch_size=2000)
        RecallEntry.objects.bulk_create(entries, batch_size=2000)
    if live_only:
        counts = memories.order_by().values_list("owner_id").annotate(n=Count("pk"))
        RecallIndex.objects.bulk_create(
            RecallIndex(owner_id=owner_id, profile=profile.name, live_memories=n)
            for owner_id, n in counts
        )


def rekey_for_taproot(apps, schema_editor):
    _rebuild(apps, TAPROOT, live_only=True)


def back_to_seed_tokens(apps, schema_editor):
    _rebuild(apps, SEED, live_only=False)


class Migration(migrations.Migration):
    dependencies = [
        ("memories", "0003_recallentry_recallindex_and_more"),
    ]

    operations = [
        migrations.RunPython(rekey_for_taproot, back_to_seed_tokens),
    ]
