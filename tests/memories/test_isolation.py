"""A second user's memories are invisible and untouchable through every operation."""

import pytest

from mcp_bridge.handlers import (
    archive,
    compress,
    forget,
    promote,
    recall,
    remember,
    status,
    unarchive,
)
from memories.errors import InvalidInput, Refused
from memories.models import ChangeSource, Closing, Revision
from memories.services import delete, edit_gist, reflect, restore_revision, set_curation
from tests.conftest import NOW
from tests.store import unchanged

pytestmark = pytest.mark.django_db


@pytest.fixture
def theirs(other_user, make_memory):
    """Bob's memories: a live one that shares words with Alice's, and an archived one."""
    live = make_memory(
        owner=other_user,
        category="identity",
        gist="Garden secrets",
        content="Bob's garden secrets",
        tags=["garden"],
        salience="high",
        core=True,
    )
    archived = make_memory(
        owner=other_user, gist="Old garden", archived_at=NOW, archive_reason="old"
    )
    promote(owner=other_user, memory_id=live.pk, salience="medium", now=NOW)
    Closing.objects.create(owner=other_user, reflection="Bob's closing", created_at=NOW)
    return live, archived


@pytest.fixture
def mine(user, make_memory):
    return make_memory(
        category="identity", gist="Garden notes", content="My garden notes", tags=["Garden"]
    )


def bob_revision(live):
    return Revision.objects.get(memory=live).pk


WRITES = {
    "remember update": lambda user, live, archived, mine: remember(
        owner=user, update_id=str(live.pk), category="identity", content="Taken over"
    ),
    "promote": lambda user, live, archived, mine: promote(
        owner=user, memory_id=live.pk, core=False
    ),
    "set_curation": lambda user, live, archived, mine: set_curation(
        owner=user, memory_id=live.pk, salience="low", source=ChangeSource.DASHBOARD
    ),
    "edit_gist": lambda user, live, archived, mine: edit_gist(
        owner=user, memory_id=live.pk, gist="Mine now", source=ChangeSource.DASHBOARD
    ),
    "archive": lambda user, live, archived, mine: archive(owner=user, memory_id=live.pk),
    "forget archive": lambda user, live, archived, mine: forget(
        owner=user, action="archive", memory_id=str(live.pk), reason="x"
    ),
    "forget unarchive": lambda user, live, archived, mine: forget(
        owner=user, action="unarchive", memory_id=str(archived.pk)
    ),
    "unarchive": lambda user, live, archived, mine: unarchive(owner=user, memory_id=archived.pk),
    "forget delete": lambda user, live, archived, mine: forget(
        owner=user, action="delete", memory_id=str(live.pk)
    ),
    "delete archived": lambda user, live, archived, mine: delete(owner=user, memory_id=archived.pk),
    "compress": lambda user, live, archived, mine: compress(
        owner=user, ids=[str(mine.pk), str(live.pk)], content="c", gist="g"
    ),
    "restore_revision": lambda user, live, archived, mine: restore_revision(
        owner=user, revision_id=bob_revision(live), source=ChangeSource.DASHBOARD
    ),
}


@pytest.mark.parametrize("operation", list(WRITES))
def test_writes_refuse_another_users_memory_as_if_unknown(user, theirs, mine, operation):
    live, archived = theirs
    # A tool's refusal (InvalidInput) or a service's (a DomainError) alike.
    with unchanged(), pytest.raises(Refused) as refused:
        WRITES[operation](user, live, archived, mine)
    # The message must not reveal that the id exists for somebody else.
    assert "another" not in str(refused.value).lower()
    assert "bob" not in str(refused.value).lower()


def test_refusal_for_a_foreign_id_reads_like_the_one_for_an_unknown_id(user, theirs):
    import uuid

    live, _ = theirs
    made_up = uuid.uuid4()
    with unchanged():
        with pytest.raises(InvalidInput) as foreign:
            promote(owner=user, memory_id=live.pk, core=True)
        with pytest.raises(InvalidInput) as unknown:
            promote(owner=user, memory_id=made_up, core=True)
    assert foreign.value.message.replace(str(live.pk), "ID") == unknown.value.message.replace(
        str(made_up), "ID"
    )


@pytest.mark.parametrize(
    "filters",
    [
        {"query": "garden secrets"},
        {"category": "identity"},
        {"tags": ["garden"]},
        {},
        {"since": "2000-01-01T00:00:00Z"},
    ],
)
def test_recall_never_returns_another_users_memories(user, theirs, mine, filters):
    live, _ = theirs
    reply = recall(owner=user, limit=50, **filters)
    assert [r["id"] for r in reply["results"]] == [str(mine.pk)]
    live.refresh_from_db()
    assert live.retrieval_count == 0


def test_recall_by_foreign_ids_returns_nothing_and_strengthens_nothing(user, theirs):
    live, archived = theirs
    assert recall(owner=user, ids=[str(live.pk), str(archived.pk)])["count"] == 0
    live.refresh_from_db()
    assert live.retrieval_count == 0
    assert live.last_retrieved is None


def test_remember_cannot_link_to_another_users_memory(user, theirs):
    live, _ = theirs
    reply = remember(
        owner=user,
        category="episodic",
        content="Linked",
        gist="Linked",
        linked_memories=[str(live.pk)],
    )
    assert str(live.pk) in reply["warnings"][0]
    from memories.models import Memory

    assert Memory.objects.get(pk=reply["memory_id"]).linked_memories == []


def test_duplicate_warning_never_names_another_users_memory(user, theirs):
    remember_reply = remember(
        owner=user, category="identity", content="Bob's garden secrets", gist="Garden secrets"
    )
    assert "warnings" not in remember_reply


def test_reflect_and_status_show_only_the_callers_data(user, theirs, mine):
    live, archived = theirs
    result = reflect(owner=user, now=NOW)
    assert str(live.pk) not in result.text and str(archived.pk) not in result.text
    assert "Bob's closing" not in result.text
    assert result.payload["core_count"] == 0
    assert result.payload["catalog_count"] == 1
    counts = status(owner=user, now=NOW)
    assert counts["live_memories"] == 1
    assert counts["archived"] == 0
    assert counts["closings"] == 0
    assert counts["core_count"] == 0


def test_the_other_user_still_sees_their_own(other_user, theirs, mine):
    live, _ = theirs
    reply = recall(owner=other_user, query="garden", limit=50)
    assert [r["id"] for r in reply["results"]] == [str(live.pk)]
