import json
from datetime import timedelta
from pathlib import Path

import pytest

from mcp_bridge import handlers
from memories import services
from memories.errors import (
    InvalidInput,
    SnapshotRecordTaken,
    UnknownSnapshot,
    UnreadableSnapshot,
)
from memories.models import Closing, Memory, MemoryTag, MemoryToken, Revision, Snapshot
from memories.services import (
    import_store,
    migrate,
    restore_snapshot,
    snapshot_summary,
    take_snapshot,
)
from tests.conftest import NOW
from tests.store import stored_columns, unchanged

pytestmark = pytest.mark.django_db

LATER = NOW + timedelta(days=1)
FIXTURE = Path(__file__).parent.parent / "fixtures" / "original-taproot-backup.json"


def index_of(memory):
    return (
        sorted(
            MemoryToken.objects.filter(entry__memory_id=memory.pk).values_list("key", "in_keywords")
        ),
        sorted(MemoryTag.objects.filter(memory_id=memory.pk).values_list("key", flat=True)),
    )


def test_restoring_a_migrate_snapshot_brings_the_records_back_exactly(user, make_memory):
    drifted = make_memory(
        category="event",
        salience="3",
        gist="",
        tags='["kitchen"]',
        search_keywords="bread",
        content="Bakes bread on Sundays. Sourdough mostly.",
        last_retrieved=NOW - timedelta(days=3),
        retrieval_count=2,
    )
    as_it_was, index_as_it_was = stored_columns(drifted), index_of(drifted)
    snapshot_id = migrate(owner=user, now=NOW).snapshot_ids[0]
    assert stored_columns(drifted) != as_it_was

    reply = restore_snapshot(snapshot_id=snapshot_id, now=LATER)

    assert (reply.restored, reply.recreated, reply.removed) == (1, 0, 0)
    assert stored_columns(drifted) == as_it_was
    assert index_of(drifted) == index_as_it_was


def test_a_restore_first_snapshots_the_present_state(user, make_memory):
    memory = make_memory(category="event")
    snapshot_id = migrate(owner=user, now=NOW).snapshot_ids[0]
    Closing.objects.create(owner=user, reflection="Now.", created_at=NOW)

    reply = restore_snapshot(snapshot_id=snapshot_id, now=LATER)

    safety = reply.before_restore
    assert safety.reason == "before-restore"
    assert safety.created_at == LATER
    assert safety.records["whole_store"] is True
    [value] = safety.records["memories"]
    assert (value["id"], value["category"]) == (str(memory.pk), "episodic")
    assert [c["reflection"] for c in safety.records["closings"]] == ["Now."]


def test_restoring_the_before_restore_snapshot_undoes_the_restore(user, make_memory):
    memory = make_memory(category="event")
    snapshot_id = migrate(owner=user, now=NOW).snapshot_ids[0]
    migrated = stored_columns(memory)
    safety_id = restore_snapshot(snapshot_id=snapshot_id, now=LATER).before_restore.pk

    restore_snapshot(snapshot_id=safety_id, now=LATER)

    assert stored_columns(memory) == migrated


def test_a_snapshot_of_some_records_leaves_the_others_alone(user, make_memory):
    drifted = make_memory(category="event")
    snapshot_id = migrate(owner=user, now=NOW).snapshot_ids[0]
    newer = make_memory(content="Written after the snapshot.")

    restore_snapshot(snapshot_id=snapshot_id, now=LATER)

    assert Memory.objects.get(pk=drifted.pk).category == "event"
    assert Memory.objects.filter(pk=newer.pk).exists()


def test_a_memory_deleted_since_the_snapshot_is_recreated(user, make_memory):
    memory = make_memory(category="event", tags=["keep"])
    as_it_was = stored_columns(memory)
    snapshot_id = migrate(owner=user, now=NOW).snapshot_ids[0]
    services.delete(owner=user, memory_id=memory.pk)

    reply = restore_snapshot(snapshot_id=snapshot_id, now=LATER)

    assert reply.recreated == 1
    assert stored_columns(memory) == as_it_was
    assert handlers.recall(owner=user, tags=["keep"], now=LATER)["count"] == 1


def test_restoring_the_before_import_snapshot_undoes_the_import(user, make_memory):
    existing = make_memory(category="event", content="Was here first.")
    earlier = Closing.objects.create(owner=user, reflection="Earlier.", created_at=NOW)
    as_it_was = stored_columns(existing)
    reply = import_store(owner=user, data=FIXTURE.read_text(), now=NOW)
    assert Memory.objects.filter(owner=user).count() == 8

    restored = restore_snapshot(snapshot_id=reply.snapshot_id, now=LATER)

    assert list(Memory.objects.filter(owner=user)) == [existing]
    assert stored_columns(existing) == as_it_was  # import's normalisation undone too
    assert list(Closing.objects.filter(owner=user)) == [earlier]
    assert (restored.removed, restored.closings_removed) == (7, 1)
    assert not MemoryToken.objects.exclude(entry__memory=existing).exists()


def test_restore_keeps_a_revision_of_tracked_changes(user, make_memory):
    memory = make_memory(category="event")
    snapshot_id = migrate(owner=user, now=NOW).snapshot_ids[0]

    restore_snapshot(snapshot_id=snapshot_id, now=LATER)

    revision = Revision.objects.filter(memory=memory).order_by("-created_at").first()
    assert (revision.source, revision.action) == ("admin", "restore snapshot")
    assert (revision.before["category"], revision.after["category"]) == ("episodic", "event")


def test_an_unknown_snapshot_is_refused(user):
    with unchanged(), pytest.raises(UnknownSnapshot) as refused:
        restore_snapshot(snapshot_id="999999", now=LATER)

    assert refused.value.snapshot_id == 999_999
    assert str(refused.value) == "No snapshot 999999 exists."
    assert not Snapshot.objects.exists()


@pytest.mark.parametrize("snapshot_id", ["abc", None])
def test_a_snapshot_id_that_is_not_a_number_is_refused(user, snapshot_id):
    with unchanged(), pytest.raises(InvalidInput, match="A snapshot id is a number"):
        restore_snapshot(snapshot_id=snapshot_id, now=LATER)

    assert not Snapshot.objects.exists()


def test_an_owner_cannot_restore_someone_elses_snapshot(user, other_user, make_memory):
    make_memory(category="event")
    snapshot_id = migrate(owner=user, now=NOW).snapshot_ids[0]

    with unchanged(), pytest.raises(UnknownSnapshot):
        restore_snapshot(snapshot_id=snapshot_id, owner=other_user, now=LATER)


def test_a_damaged_snapshot_is_refused_and_changes_nothing(user, make_memory):
    make_memory()
    snapshot = Snapshot.objects.create(
        owner=user, created_at=NOW, reason="broken", records={"memories": [{"id": "x"}]}
    )

    with unchanged(), pytest.raises(UnreadableSnapshot, match="cannot be read") as refused:
        restore_snapshot(snapshot_id=snapshot.pk, now=LATER)

    assert refused.value.snapshot_id == snapshot.pk

    assert Snapshot.objects.count() == 1


def test_a_snapshot_whose_memory_now_belongs_to_another_user_is_refused(
    user, other_user, make_memory
):
    memory = make_memory()
    snapshot = take_snapshot(owner_id=user.pk, reason="test", now=NOW, memories=[memory])
    Memory.objects.filter(pk=memory.pk).update(owner=other_user)

    with unchanged(), pytest.raises(SnapshotRecordTaken, match="another user") as refused:
        restore_snapshot(snapshot_id=snapshot.pk, now=LATER)

    assert (refused.value.kind, refused.value.record_id) == ("memory", memory.pk)
    assert Snapshot.objects.count() == 1
    assert Memory.objects.get(pk=memory.pk).owner == other_user


def test_a_snapshot_whose_closing_now_belongs_to_another_user_is_refused(
    user, other_user, make_memory
):
    make_memory()
    closing = Closing.objects.create(owner=user, reflection="We talked.", created_at=NOW)
    snapshot = take_snapshot(owner_id=user.pk, reason="test", now=NOW)
    Closing.objects.filter(pk=closing.pk).update(owner=other_user)

    with unchanged(), pytest.raises(SnapshotRecordTaken) as refused:
        restore_snapshot(snapshot_id=snapshot.pk, now=LATER)

    assert (refused.value.kind, refused.value.record_id) == ("closing", closing.pk)
    assert str(refused.value).startswith(f"Snapshot {snapshot.pk} cannot be restored: closing")
    assert Closing.objects.get(pk=closing.pk).owner == other_user


def test_a_snapshot_says_what_restoring_it_does(user, make_memory):
    memory = make_memory()
    some = take_snapshot(owner_id=user.pk, reason="test", now=NOW, memories=[memory])
    whole = take_snapshot(owner_id=user.pk, reason="test", now=NOW)

    assert "leaves every other record alone" in snapshot_summary(some)
    assert "records made since are removed" in snapshot_summary(whole)
    json.dumps(whole.records)
