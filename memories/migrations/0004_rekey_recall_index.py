"""Re-key every store for the taproot relevance profile (SPEC §3.1): each live memory gets
its ranking entry and the new profile's tokens (Unicode words, stop words out, Snowball
stems), each owner a RecallIndex row recording the profile and the number of live
memories. (Undoing 0003 rebuilds the old tokens.)"""

from datetime import UTC, datetime, timedelta

from django.db import migrations
from django.db.models import Count

from memories.recall.ranking import TAPROOT, index_entries, memory_terms

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


def rekey_for_taproot(apps, schema_editor):
    Memory = apps.get_model("memories", "Memory")
    MemoryToken = apps.get_model("memories", "MemoryToken")
    RecallEntry = apps.get_model("memories", "RecallEntry")
    RecallIndex = apps.get_model("memories", "RecallIndex")
    live = Memory.objects.filter(archived_at__isnull=True).order_by("pk")
    last = None
    while batch := list((live.filter(pk__gt=last) if last else live)[:BATCH]):
        last = batch[-1].pk
        entries = RecallEntry.objects.bulk_create(
            RecallEntry(
                memory_id=memory.pk,
                owner_id=memory.owner_id,
                category=memory.category,
                salience=memory.salience,
                retrieval_count=memory.retrieval_count,
                last_retrieved_us=_micros(memory.last_retrieved) if memory.last_retrieved else None,
                created_us=_micros(memory.created_at),
                updated_us=_micros(memory.updated_at),
            )
            for memory in batch
        )
        tokens = []
        for memory, entry in zip(batch, entries, strict=True):
            terms = memory_terms(
                gist=memory.gist,
                content=memory.content,
                tags=_strings(memory.tags),
                search_keywords=_strings(memory.search_keywords),
                profile=TAPROOT,
            )
            tokens += [
                MemoryToken(entry_id=entry.pk, owner_id=memory.owner_id, key=k, in_keywords=kw)
                for k, kw in index_entries(terms).items()
            ]
        MemoryToken.objects.bulk_create(tokens, batch_size=2000)
    counts = live.order_by().values_list("owner_id").annotate(n=Count("pk"))
    RecallIndex.objects.bulk_create(
        RecallIndex(owner_id=owner_id, profile=TAPROOT.name, live_memories=n)
        for owner_id, n in counts
    )


class Migration(migrations.Migration):
    dependencies = [
        ("memories", "0003_recall_index_by_entry"),
    ]

    operations = [
        # Undoing it needs nothing: undoing 0003 drops these tables.
        migrations.RunPython(rekey_for_taproot, migrations.RunPython.noop),
    ]
