import uuid
from datetime import timedelta

import pytest

from mcp_bridge.handlers import forget, recall, status
from memories.errors import InvalidInput
from memories.models import ChangeSource, Memory, Revision
from memories.services import reflect
from tests.conftest import NOW
from tests.store import stored_columns, unchanged

pytestmark = pytest.mark.django_db

LATER = NOW + timedelta(days=2)


# --- archive / unarchive --------------------------------------------------------------


def test_archive_stores_the_reason_and_keeps_the_record(user, make_memory):
    memory = make_memory(gist="Garden")
    reply = forget(
        owner=user, action="archive", memory_id=str(memory.pk), reason="no longer true", now=LATER
    )
    assert reply["status"] == "ok"
    assert reply["action"] == "archived"
    assert reply["memory_id"] == str(memory.pk)
    memory.refresh_from_db()
    assert memory.archived_at == LATER
    assert memory.archive_reason == "no longer true"
    assert memory.updated_at == NOW  # archiving does not move updated_at
    assert memory.content == "A plain memory."


def test_archive_keeps_a_revision_from_the_tool(user, make_memory):
    memory = make_memory()
    forget(owner=user, action="archive", memory_id=memory.pk, reason="stale", now=LATER)
    revision = Revision.objects.get(memory=memory)
    assert revision.source == ChangeSource.TOOL
    assert set(revision.changed_fields) == {"archived_at", "archive_reason"}
    assert revision.before["archived_at"] is None
    assert revision.after["archived_at"] == "2026-12-01T12:00:00Z"
    assert revision.after["archive_reason"] == "stale"


def test_archived_memory_is_hidden_from_recall_reflect_and_status(user, make_memory):
    memory = make_memory(gist="Garden", salience="high", core=False)
    core = make_memory(gist="Core", core=True, category="identity")
    for target in (memory, core):
        forget(owner=user, action="archive", memory_id=target.pk, now=LATER)
    assert recall(owner=user, query="garden", now=LATER)["count"] == 0
    assert recall(owner=user, ids=[str(memory.pk)], now=LATER)["count"] == 0
    assert recall(owner=user, now=LATER)["count"] == 0
    result = reflect(owner=user, now=LATER)
    assert str(memory.pk) not in result.text and str(core.pk) not in result.text
    counts = status(owner=user, now=LATER)
    assert counts["live_memories"] == 0
    assert counts["archived"] == 2
    assert counts["core_count"] == 0


def test_archiving_an_archived_memory_is_a_no_op_that_says_so(user, make_memory):
    memory = make_memory(archived_at=NOW, archive_reason="first")
    before = stored_columns(memory)
    reply = forget(owner=user, action="archive", memory_id=memory.pk, reason="again", now=LATER)
    assert reply["action"] == "archived"
    assert reply["changed"] is False
    assert "already archived" in reply["message"]
    assert stored_columns(memory) == before
    assert Revision.objects.count() == 0


def test_unarchive_brings_a_memory_back(user, make_memory):
    memory = make_memory(gist="Garden", archived_at=NOW, archive_reason="old")
    reply = forget(owner=user, action="unarchive", memory_id=memory.pk, now=LATER)
    assert reply["action"] == "unarchived"
    assert reply["memory_id"] == str(memory.pk)
    memory.refresh_from_db()
    assert memory.archived_at is None and memory.archive_reason is None
    assert memory.updated_at == NOW
    assert recall(owner=user, query="garden", now=LATER)["count"] == 1
    revision = Revision.objects.get(memory=memory)
    assert revision.before["archive_reason"] == "old"
    assert revision.after["archived_at"] is None


def test_unarchiving_a_live_memory_is_a_no_op_that_says_so(user, make_memory):
    memory = make_memory()
    before = stored_columns(memory)
    reply = forget(owner=user, action="unarchive", memory_id=memory.pk, now=LATER)
    assert reply["changed"] is False
    assert "not archived" in reply["message"]
    assert stored_columns(memory) == before
    assert Revision.objects.count() == 0


@pytest.mark.parametrize("action", [" Archive ", "ARCHIVE"])
def test_action_ignores_case_and_spaces(user, make_memory, action):
    memory = make_memory()
    assert forget(owner=user, action=action, memory_id=memory.pk)["action"] == "archived"


@pytest.mark.parametrize("action", ["erase", "", None, "compress_all"])
def test_unknown_action_is_refused_listing_the_allowed_ones(user, make_memory, action):
    memory = make_memory()
    with unchanged(), pytest.raises(InvalidInput) as refused:
        forget(owner=user, action=action, memory_id=memory.pk)
    for name in ("archive", "unarchive", "delete", "compress"):
        assert name in refused.value.message


@pytest.mark.parametrize("action", ["archive", "unarchive", "delete"])
def test_actions_on_one_memory_need_its_id(user, action):
    with unchanged(), pytest.raises(InvalidInput) as refused:
        forget(owner=user, action=action)
    assert "memory_id" in refused.value.message


@pytest.mark.parametrize("action", ["archive", "unarchive", "delete"])
def test_actions_refuse_unknown_ids(user, action):
    with unchanged(), pytest.raises(InvalidInput):
        forget(owner=user, action=action, memory_id=str(uuid.uuid4()))


def test_archive_reason_has_a_bound(user, make_memory):
    memory = make_memory()
    with unchanged(), pytest.raises(InvalidInput):
        forget(owner=user, action="archive", memory_id=memory.pk, reason="r" * 1001)
    assert Memory.objects.get().archived_at is None


# --- delete ---------------------------------------------------------------------------


def test_delete_removes_the_memory_and_its_revisions(user, make_memory):
    memory = make_memory()
    forget(owner=user, action="archive", memory_id=memory.pk)
    reply = forget(owner=user, action="delete", memory_id=str(memory.pk))
    assert reply == {"status": "ok", "action": "deleted", "memory_id": str(memory.pk)}
    assert not Memory.objects.filter(pk=memory.pk).exists()
    assert not Revision.objects.filter(memory_id=memory.pk).exists()


def test_delete_leaves_other_memories_alone(user, make_memory):
    keep = make_memory()
    gone = make_memory()
    forget(owner=user, action="delete", memory_id=gone.pk)
    assert list(Memory.objects.values_list("pk", flat=True)) == [keep.pk]


# --- compress -------------------------------------------------------------------------


def compress(user, ids, **overrides):
    values = {
        "owner": user,
        "action": "compress",
        "ids": [str(i) for i in ids],
        "content": "Summary of both",
        "gist": "Both, summarised",
        "now": LATER,
    }
    values.update(overrides)
    return forget(**values)


def test_compress_writes_one_memory_that_follows_the_rules(user, make_memory):
    a = make_memory(
        category="error",
        salience="low",
        core=False,
        tags=["dates", "Calendar"],
        compression_level=0,
    )
    b = make_memory(
        category="error",
        salience="high",
        core=True,
        tags=["calendar", "Calendar", "time"],
        compression_level=2,
    )
    c = make_memory(category="error", salience="medium", tags=[], compression_level=1)
    reply = compress(user, [a.pk, b.pk, c.pk])
    assert reply["status"] == "ok"
    assert reply["action"] == "compressed"
    assert reply["archived"] == [str(a.pk), str(b.pk), str(c.pk)]
    new = Memory.objects.get(pk=reply["memory_id"])
    assert new.owner == user
    assert new.category == "error"
    assert new.salience == "high"
    assert new.core is True
    assert new.tags == ["dates", "Calendar", "calendar", "time"]
    assert new.linked_memories == [str(a.pk), str(b.pk), str(c.pk)]
    assert new.compression_level == 3
    assert (new.content, new.gist, new.gist_autogenerated) == (
        "Summary of both",
        "Both, summarised",
        False,
    )
    assert new.created_at == new.updated_at == new.last_touched_at == LATER
    assert new.archived_at is None
    for original in (a, b, c):
        original.refresh_from_db()
        assert original.archived_at == LATER
        assert original.archive_reason == f"compressed into {new.pk}"
        assert original.updated_at == NOW
        revision = Revision.objects.get(memory=original)
        assert revision.source == ChangeSource.TOOL


def test_compress_without_core_or_high_keeps_the_highest_salience(user, make_memory):
    a = make_memory(salience="low")
    b = make_memory(salience="medium")
    new = Memory.objects.get(pk=compress(user, [a.pk, b.pk])["memory_id"])
    assert (new.salience, new.core, new.compression_level) == ("medium", False, 1)


@pytest.mark.parametrize(
    ("saliences", "highest"),
    [
        (["3", "low"], "high"),
        ([" 2 ", "low"], "medium"),
        (["1", "low"], "low"),
        (["HIGH", "1"], "high"),
    ],
)
def test_compress_reads_legacy_saliences_as_migrate_does_before_taking_the_highest(
    user, make_memory, saliences, highest
):
    originals = [make_memory(salience=salience) for salience in saliences]
    reply = compress(user, [m.pk for m in originals])
    assert reply["salience"] == highest
    assert Memory.objects.get(pk=reply["memory_id"]).salience == highest


def test_compress_across_categories_needs_a_category(user, make_memory):
    a = make_memory(category="episodic")
    b = make_memory(category="identity")
    with unchanged(), pytest.raises(InvalidInput) as refused:
        compress(user, [a.pk, b.pk])
    assert "category" in refused.value.message
    reply = compress(user, [a.pk, b.pk], category="identity")
    assert Memory.objects.get(pk=reply["memory_id"]).category == "identity"


def test_compress_accepts_a_json_encoded_id_list(user, make_memory):
    a, b = make_memory(), make_memory()
    reply = forget(
        owner=user,
        action="compress",
        ids=f'["{a.pk}", "{b.pk}"]',
        content="Both",
        gist="Both",
    )
    assert reply["archived"] == [str(a.pk), str(b.pk)]


def test_compressed_memory_is_what_recall_finds(user, make_memory):
    a = make_memory(gist="Kayak Monday")
    b = make_memory(gist="Kayak Friday")
    reply = compress(user, [a.pk, b.pk], gist="Kayak week")
    assert [r["id"] for r in recall(owner=user, query="kayak", now=LATER)["results"]] == [
        reply["memory_id"]
    ]


@pytest.mark.parametrize("how_many", [0, 1])
def test_compress_refuses_fewer_than_two(user, make_memory, how_many):
    ids = [make_memory().pk for _ in range(how_many)]
    with unchanged(), pytest.raises(InvalidInput) as refused:
        compress(user, ids)
    assert "two" in refused.value.message


def test_compress_refuses_the_same_id_twice(user, make_memory):
    memory = make_memory()
    with unchanged(), pytest.raises(InvalidInput):
        compress(user, [memory.pk, memory.pk])


def test_compress_refuses_missing_ids(user):
    with unchanged(), pytest.raises(InvalidInput):
        forget(owner=user, action="compress", content="x", gist="x")


@pytest.mark.parametrize("problem", ["foreign", "unknown", "archived"])
def test_compress_refuses_ids_that_are_not_live_and_yours_changing_nothing(
    user, other_user, make_memory, problem
):
    mine = make_memory()
    if problem == "foreign":
        bad = make_memory(owner=other_user).pk
    elif problem == "unknown":
        bad = uuid.uuid4()
    else:
        bad = make_memory(archived_at=NOW, archive_reason="old").pk
    with unchanged(), pytest.raises(InvalidInput) as refused:
        compress(user, [mine.pk, bad])
    assert str(bad) in refused.value.message


@pytest.mark.parametrize(
    "overrides",
    [
        {"content": " "},
        {"content": None},
        {"gist": ""},
        {"gist": None},
        {"content": "x" * 20_001},
        {"gist": "g" * 301},
        {"category": "diary"},
    ],
)
def test_compress_refuses_bad_text_changing_nothing(user, make_memory, overrides):
    a, b = make_memory(), make_memory()
    with unchanged(), pytest.raises(InvalidInput):
        compress(user, [a.pk, b.pk], **overrides)
    assert Memory.objects.live().count() == 2


def test_compress_refuses_a_tag_union_over_the_limit(user, make_memory):
    a = make_memory(tags=[f"a{i}" for i in range(30)])
    b = make_memory(tags=[f"b{i}" for i in range(30)])
    with unchanged(), pytest.raises(InvalidInput) as refused:
        compress(user, [a.pk, b.pk])
    assert "50" in refused.value.message


def test_compress_reads_drifted_tags_as_migrate_would(user, make_memory):
    a = make_memory(tags="calendar")
    b = make_memory(tags=["time", 3])
    new = Memory.objects.get(pk=compress(user, [a.pk, b.pk])["memory_id"])
    assert new.tags == ["calendar", "time"]
