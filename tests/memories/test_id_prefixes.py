"""Every argument that takes a memory id takes its short form too (a unique prefix of 8 or
more hex characters); replies keep whole ids."""

import uuid

import pytest

from mcp_bridge.handlers import forget, promote, recall, remember
from memories.errors import InvalidInput
from memories.models import Memory
from tests.conftest import NOW
from tests.store import unchanged

pytestmark = pytest.mark.django_db

A = uuid.UUID("a002ab76-58b6-4e9c-ba6d-7ec35cb2e2be")
A_TWIN = uuid.UUID("a002ab76-58c0-4e9c-ba6d-7ec35cb2e2be")
B = uuid.UUID("b1b2b3b4-0000-4000-8000-000000000000")
C = uuid.UUID("c1c2c3c4-0000-4000-8000-000000000000")


@pytest.fixture
def store(make_memory):
    return {
        "a": make_memory(id=A, gist="Alpha"),
        "twin": make_memory(id=A_TWIN, gist="Alpha twin"),
        "b": make_memory(id=B, gist="Beta"),
        "c": make_memory(id=C, gist="Gamma"),
    }


def test_recall_ids_take_prefixes_and_reply_with_whole_ids(user, store):
    reply = recall(owner=user, ids=["b1b2b3b4", "[c1c2c3c4]", str(A)], now=NOW)
    assert {record["id"] for record in reply["results"]} == {str(A), str(B), str(C)}
    assert "warnings" not in reply


def test_recall_skips_an_ambiguous_or_unknown_prefix_naming_the_candidates(user, store):
    reply = recall(owner=user, ids=["a002ab76", "deadbeef", "b1b2b3b4"], now=NOW)
    assert [record["id"] for record in reply["results"]] == [str(B)]
    (warning,) = reply["warnings"]
    assert warning.startswith("Skipped entries of ids that name no single memory")
    assert f"'a002ab76' matches 2 of your memories ({A}, {A_TWIN})" in warning
    assert "'deadbeef' matches none of your memories" in warning


def test_recall_by_prefixes_alone_that_name_nothing_returns_nothing(user, store):
    reply = recall(owner=user, ids=["deadbeef"], now=NOW)
    assert reply["count"] == 0


def test_remember_update_id_takes_a_prefix(user, store):
    reply = remember(owner=user, update_id="b1b2b3b4", gist="Beta, renamed", now=NOW)
    assert reply["memory_id"] == str(B)
    assert Memory.objects.get(pk=B).gist == "Beta, renamed"


def test_remember_refuses_an_ambiguous_update_id_naming_the_candidates(user, store):
    with unchanged(), pytest.raises(InvalidInput) as refused:
        remember(owner=user, update_id="a002ab76", gist="Which one?", now=NOW)
    assert str(A) in refused.value.message and str(A_TWIN) in refused.value.message


def test_remember_linked_memories_take_prefixes_and_store_whole_ids(user, store):
    reply = remember(
        owner=user,
        category="episodic",
        content="Links by short ids.",
        gist="Links",
        linked_memories=["b1b2b3b4", "a002ab76", "a002ab76-58c"],
        now=NOW,
    )
    memory = Memory.objects.get(pk=reply["memory_id"])
    assert memory.linked_memories == [str(B), str(A_TWIN)]
    assert any("Skipped entries of linked_memories" in w and str(A) in w for w in reply["warnings"])


def test_promote_memory_id_takes_a_prefix(user, store):
    reply = promote(owner=user, memory_id="c1c2c3c4", core=True, now=NOW)
    assert reply["memory_id"] == str(C)
    assert Memory.objects.get(pk=C).core is True


def test_promote_refuses_an_unknown_prefix(user, store):
    with unchanged(), pytest.raises(InvalidInput) as refused:
        promote(owner=user, memory_id="deadbeef", core=True, now=NOW)
    assert "No memory of yours has an id starting with 'deadbeef'" in refused.value.message


@pytest.mark.parametrize("action", ["archive", "delete"])
def test_forget_memory_id_takes_a_prefix(user, store, action):
    reply = forget(owner=user, action=action, memory_id="c1c2c3c4", now=NOW)
    assert reply["memory_id"] == str(C)


def test_unarchive_takes_the_prefix_of_an_archived_memory(user, store):
    forget(owner=user, action="archive", memory_id=str(C), now=NOW)
    reply = forget(owner=user, action="unarchive", memory_id="c1c2c3c4", now=NOW)
    assert (reply["memory_id"], reply["changed"]) == (str(C), True)


def test_compress_ids_take_prefixes_and_skip_an_ambiguous_one_with_a_warning(user, store):
    reply = forget(
        owner=user,
        action="compress",
        ids=["b1b2b3b4", "c1c2c3c4", "a002ab76"],
        content="Beta and gamma, together.",
        gist="Beta and gamma",
        now=NOW,
    )
    assert reply["archived"] == [str(B), str(C)]
    assert any("'a002ab76' matches 2 of your memories" in w for w in reply["warnings"])


def test_compress_refuses_when_skipping_leaves_fewer_than_two(user, store):
    with unchanged(), pytest.raises(InvalidInput) as refused:
        forget(
            owner=user,
            action="compress",
            ids=["b1b2b3b4", "a002ab76"],
            content="x",
            gist="x",
            now=NOW,
        )
    assert refused.value.message.startswith("compress needs at least two distinct memory ids")
    assert "'a002ab76' matches 2 of your memories" in refused.value.message
