"""The counts reflect and status read (memories.models.counts) stay equal to the rows
after every kind of write: create, update, promote, archive, unarchive, delete,
compress, import, undoing an import (a snapshot restore), the admin's plain save and a
bulk update; and the repair makes them right again when something went behind them."""

import random
from datetime import timedelta

import pytest
from django.core.management import call_command

from mcp_bridge import handlers
from memories.models import Memory, StoreCount
from memories.models.counts import counted_rows, kept_counts
from memories.services import import_store, restore_snapshot
from tests.conftest import NOW
from tests.memories.test_import import fixture_text

pytestmark = pytest.mark.django_db

CATEGORIES = ["identity", "relationship", "active_thread", "episodic", "error"]
SALIENCES = ["high", "medium", "low"]


def assert_counts_right() -> None:
    assert kept_counts() == counted_rows()


def _remember(user, n: int, **fields) -> str:
    reply = handlers.remember(
        owner=user,
        category=fields.pop("category", "episodic"),
        gist=f"Walk {n}",
        content=f"Walked along the river, number {n}.",
        now=NOW,
        **fields,
    )
    return str(reply["memory_id"])


def test_every_kind_of_write_keeps_the_counts(user, other_user):
    ids = [_remember(user, n, salience=("high", "medium", "low")[n % 3]) for n in range(6)]
    _remember(other_user, 99)
    assert_counts_right()
    handlers.remember(owner=user, update_id=ids[0], category="identity", now=NOW)
    assert_counts_right()
    handlers.promote(owner=user, memory_id=ids[1], core=True, salience="high", now=NOW)
    assert_counts_right()
    handlers.forget(owner=user, action="archive", memory_id=ids[2], now=NOW)
    assert_counts_right()
    handlers.forget(owner=user, action="unarchive", memory_id=ids[2], now=NOW)
    handlers.forget(owner=user, action="archive", memory_id=ids[3], now=NOW)
    assert_counts_right()
    handlers.forget(owner=user, action="delete", memory_id=ids[4])
    assert_counts_right()
    handlers.forget(
        owner=user,
        action="compress",
        ids=ids[:2],
        content="Both walks.",
        gist="Walks",
        category="episodic",
        now=NOW,
    )
    assert_counts_right()

    imported = import_store(owner=user, data=fixture_text(), now=NOW)
    assert imported.memories > 0
    assert_counts_right()
    restore_snapshot(snapshot_id=imported.snapshot_id, now=NOW + timedelta(minutes=1))
    assert_counts_right()

    memory = Memory.objects.filter(owner=user).first()
    memory.category, memory.core = "relationship", not memory.core
    memory.save()  # as the admin saves a change
    Memory.objects.filter(owner=user).update(salience="low")  # a bulk write
    assert_counts_right()
    user.delete()
    assert_counts_right()
    assert set(kept_counts()) == {key for key in counted_rows() if key[0] == other_user.pk}


def test_reflect_and_status_read_the_kept_counts(user, make_memory):
    for n in range(4):
        make_memory(gist=f"Old {n}", core=n == 0, salience="low")
    # Counts made wrong behind the triggers' back show in status: it reads them.
    StoreCount.objects.filter(owner=user, core=False).update(n=10)
    assert handlers.status(owner=user, now=NOW)["live_memories"] == 11
    call_command("reindex_taproot", user=user.username, verbosity=0)
    assert_counts_right()
    assert handlers.status(owner=user, now=NOW)["live_memories"] == 4


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_counts_stay_right_through_a_random_run_of_writes(user, seed):
    """Any order of writes, any memory: after each, the counts equal the rows."""
    rng = random.Random(seed)
    ids = [_remember(user, n) for n in range(4)]
    for step in range(40):
        memory_id = rng.choice(ids)
        archived = Memory.objects.filter(pk=memory_id, archived_at__isnull=False).exists()
        action = rng.choice(["create", "update", "promote", "archive", "delete"])
        if action == "create":
            ids.append(_remember(user, 100 + step, salience=rng.choice(SALIENCES)))
        elif action == "update" and not archived:
            category = rng.choice(CATEGORIES)
            handlers.remember(owner=user, update_id=memory_id, category=category, now=NOW)
        elif action == "promote" and not archived:
            core, salience = rng.choice([True, False]), rng.choice(SALIENCES)
            handlers.promote(owner=user, memory_id=memory_id, core=core, salience=salience)
        elif action == "archive":
            verb = "unarchive" if archived else "archive"
            handlers.forget(owner=user, action=verb, memory_id=memory_id, now=NOW)
        elif action == "delete" and len(ids) > 1:
            handlers.forget(owner=user, action="delete", memory_id=memory_id)
            ids.remove(memory_id)
        assert_counts_right()
