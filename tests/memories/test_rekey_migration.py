"""Migrations 0003–0004 re-key an existing store for the taproot profile, and undoing them
gives back the seed tokens 0002 had (SPEC §3.1: "A migration re-keys existing stores")."""

from datetime import UTC, datetime

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("memories", "0002_remove_memory_memory_live_core_salience_and_more")]
AFTER = [("memories", "0004_rekey_recall_index")]
NOW = datetime(2026, 11, 1, tzinfo=UTC)


def migrate_to(targets):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


@pytest.fixture
def at_0002():
    apps = migrate_to(BEFORE)
    yield apps
    migrate_to(MigrationExecutor(connection).loader.graph.leaf_nodes())


def test_the_store_is_re_keyed_for_taproot_and_back_for_the_seed_rule(at_0002):
    user = at_0002.get_model("auth", "User").objects.create(username="kept")
    memory = at_0002.get_model("memories", "Memory")
    common = {"owner_id": user.pk, "category": "episodic", "created_at": NOW}
    running = memory.objects.create(
        gist="Running in the gardens",
        content="What a morning",
        updated_at=NOW,
        last_touched_at=NOW,
        retrieval_count=2,
        last_retrieved=NOW,
        **common,
    )
    archived = memory.objects.create(
        gist="Old bicycle",
        content="Sold it",
        updated_at=NOW,
        last_touched_at=NOW,
        archived_at=NOW,
        **common,
    )

    apps = migrate_to(AFTER)
    entries = apps.get_model("memories", "RecallEntry").objects.all()
    assert list(entries.values_list("memory_id", "retrieval_count")) == [(running.pk, 2)]
    tokens = apps.get_model("memories", "MemoryToken").objects.filter(entry__memory_id=running.pk)
    assert set(tokens.values_list("key", "in_keywords")) == {
        ("run", True),
        ("garden", True),
        ("morn", False),
    }
    index = apps.get_model("memories", "RecallIndex").objects.get(owner_id=user.pk)
    assert (index.profile, index.live_memories) == ("taproot", 1)

    apps = migrate_to(BEFORE)
    old_tokens = apps.get_model("memories", "MemoryToken").objects
    assert set(old_tokens.filter(memory_id=running.pk).values_list("key", "in_keywords")) == {
        ("runn", True),
        ("in", True),
        ("the", True),
        ("garden", True),
        ("what", False),
        ("a", False),
        ("morn", False),
    }
    assert old_tokens.filter(memory_id=archived.pk).exists()  # 0002 indexed archived ones too
