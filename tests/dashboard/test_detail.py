"""A memory on its own page, its revisions, and restoring one."""

import uuid

import pytest

from memories.models import ChangeSource, Revision
from memories.services import archive, edit_gist, set_curation
from tests.dashboard.conftest import htmx
from tests.store import stored

pytestmark = pytest.mark.django_db


def detail_url(memory):
    return f"/dashboard/memories/{memory.pk}/"


def restore_url(revision):
    return f"/dashboard/revisions/{revision.pk}/restore/"


def test_detail_shows_every_field(logged_in, make_memory):
    memory = make_memory(
        category="active_thread",
        gist="Writing the garden book",
        content="Chapter three is late.",
        tags=["book"],
        search_keywords=["garden", "writing"],
        provenance="said so",
        conversation_url="https://claude.ai/chat/123",
        conversation_id="conv-9",
        transcript_ref="t-1",
        epistemic_status="observed",
        replication_count=2,
        compression_level=1,
        retrieval_count=4,
    )

    html = logged_in.get(detail_url(memory)).text

    for text in [
        str(memory.pk),
        "active_thread",
        "Writing the garden book",
        "Chapter three is late.",
        "garden, writing",
        "said so",
        '<a href="https://claude.ai/chat/123" rel="noopener noreferrer">',
        "conv-9",
        "t-1",
        "observed",
        "<dt>replication count</dt><dd>2</dd>",
        "<dt>compression level</dt><dd>1</dd>",
        "<dt>recall count</dt><dd>4</dd>",
    ]:
        assert text in html


def test_a_non_http_conversation_url_is_text_not_a_link(logged_in, make_memory):
    memory = make_memory(conversation_url="javascript:alert(1)")

    html = logged_in.get(detail_url(memory)).text

    assert 'href="javascript:' not in html
    assert "javascript:alert(1)" in html


def test_linked_memories_show_own_ones_and_mark_the_rest_missing(
    logged_in, make_memory, foreign_memory
):
    friend = make_memory(gist="The linked one")
    gone = uuid.uuid4()
    memory = make_memory(linked_memories=[str(friend.pk), str(gone), str(foreign_memory.pk)])

    html = logged_in.get(detail_url(memory)).text

    assert f'href="/dashboard/memories/{friend.pk}/"' in html
    assert "The linked one" in html
    assert html.count("no longer exists") == 2
    assert "Bob&#x27;s memory" not in html


def test_revision_history_says_what_changed(logged_in, user, make_memory):
    memory = make_memory(gist="Old gist", salience="medium")
    set_curation(owner=user, memory_id=memory.pk, salience="high", source=ChangeSource.DASHBOARD)
    edit_gist(owner=user, memory_id=memory.pk, gist="New gist", source=ChangeSource.TOOL)

    html = logged_in.get(detail_url(memory)).text

    assert "<strong>edit gist</strong> via tool" in html
    assert "<strong>curate</strong> via dashboard" in html
    assert '<th scope="row">salience</th><td>medium</td><td>high</td>' in html
    assert '<th scope="row">gist</th><td>Old gist</td><td>New gist</td>' in html
    assert html.index("edit gist") < html.index("curate")  # newest first


def test_restoring_before_a_change_puts_every_tracked_field_back(logged_in, user, make_memory):
    memory = make_memory(gist="Kept", salience="low", core=True, tags=["x"])
    archive(owner=user, memory_id=memory.pk, reason="stale", source=ChangeSource.DASHBOARD)
    revision = Revision.objects.get(memory=memory)

    response = logged_in.post(restore_url(revision), {"use": "before"}, **htmx())

    after = stored(memory)
    assert response.status_code == 200
    assert after.archived_at is None
    assert (after.gist, after.salience, after.core, after.tags) == ("Kept", "low", True, ["x"])
    assert after.updated_at == memory.updated_at
    latest = Revision.objects.filter(memory=memory).first()
    assert (latest.action, latest.source) == ("restore", ChangeSource.DASHBOARD)
    assert response.text.lstrip().startswith('<div id="memory-detail"')
    assert "Restored." in response.text


def test_restoring_after_a_change_reapplies_it(logged_in, user, make_memory):
    memory = make_memory(gist="First")
    edit_gist(owner=user, memory_id=memory.pk, gist="Second", source=ChangeSource.DASHBOARD)
    revision = Revision.objects.get(memory=memory)
    edit_gist(owner=user, memory_id=memory.pk, gist="Third", source=ChangeSource.DASHBOARD)

    logged_in.post(restore_url(revision), {"use": "after"})

    assert stored(memory).gist == "Second"


def test_restore_without_htmx_redirects_to_the_memory(logged_in, user, make_memory):
    memory = make_memory(gist="First")
    edit_gist(owner=user, memory_id=memory.pk, gist="Second", source=ChangeSource.DASHBOARD)
    revision = Revision.objects.get(memory=memory)

    response = logged_in.post(restore_url(revision), {"use": "before"})

    assert response.status_code == 302
    assert response["Location"] == detail_url(memory)
    assert stored(memory).gist == "First"


def test_restore_with_a_bad_choice_changes_nothing(logged_in, user, make_memory):
    memory = make_memory(gist="First")
    edit_gist(owner=user, memory_id=memory.pk, gist="Second", source=ChangeSource.DASHBOARD)
    revision = Revision.objects.get(memory=memory)

    response = logged_in.post(restore_url(revision), {"use": "sideways"}, **htmx())

    assert response.status_code == 422
    assert 'class="alert error"' in response.text
    assert stored(memory).gist == "Second"
    assert Revision.objects.filter(memory=memory).count() == 1


def test_another_users_memory_and_revision_are_404(logged_in, other_user, foreign_memory):
    archive(owner=other_user, memory_id=foreign_memory.pk, source=ChangeSource.TOOL)
    revision = Revision.objects.get(memory=foreign_memory)

    assert logged_in.get(detail_url(foreign_memory)).status_code == 404
    assert logged_in.post(restore_url(revision), {"use": "before"}).status_code == 404
    assert stored(foreign_memory).archived_at is not None


def test_unknown_memory_is_404(logged_in):
    assert logged_in.get(f"/dashboard/memories/{uuid.uuid4()}/").status_code == 404


@pytest.mark.parametrize("count", [1, 12])
def test_detail_query_count_does_not_grow_with_revisions(
    logged_in, user, make_memory, django_assert_num_queries, count
):
    memory = make_memory()
    for index in range(count):
        edit_gist(owner=user, memory_id=memory.pk, gist=f"g{index}", source=ChangeSource.TOOL)

    # session, user, the memory, its revisions (no links to look up), its short id
    with django_assert_num_queries(5):
        logged_in.get(detail_url(memory))
