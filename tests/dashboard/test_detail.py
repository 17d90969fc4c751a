"""A memory on its own page, its revisions, and restoring one."""

import re
import uuid

import pytest

from memories.models import ChangeSource, Revision
from memories.services import archive, edit_gist, set_curation, unarchive
from tests.dashboard.conftest import htmx
from tests.store import stored, unchanged

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


VERSION = re.compile(r'name="version" value="([0-9a-f]{64})"')


def preview_of(client, revision, use, **headers):
    """The restore asked for (GET): the page, and the version its confirmation carries."""
    response = client.get(restore_url(revision), {"use": use}, **headers)
    assert response.status_code == 200
    found = VERSION.search(response.text)
    return response, found.group(1) if found else None


def confirmed(client, revision, use, **headers):
    """Ask for the restore, then confirm what was shown."""
    _, version = preview_of(client, revision, use, **headers)
    return client.post(restore_url(revision), {"use": use, "version": version}, **headers)


def preview_rows(html: str) -> list[tuple[str, str, str]]:
    table = html.split('class="changes restore-changes"', 1)[1].split("</table>", 1)[0]
    return ROW.findall(table)


ROW = re.compile(r'<tr><th scope="row">([^<]*)</th><td>([^<]*)</td><td>([^<]*)</td></tr>')


def test_restoring_before_a_change_puts_every_tracked_field_back(logged_in, user, make_memory):
    memory = make_memory(gist="Kept", salience="low", core=True, tags=["x"])
    archive(owner=user, memory_id=memory.pk, reason="stale", source=ChangeSource.DASHBOARD)
    revision = Revision.objects.get(memory=memory)

    response = confirmed(logged_in, revision, "before", **htmx())

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

    confirmed(logged_in, revision, "after")

    assert stored(memory).gist == "Second"


def test_restore_without_htmx_asks_on_the_page_then_redirects_to_the_memory(
    logged_in, user, make_memory
):
    memory = make_memory(gist="First")
    edit_gist(owner=user, memory_id=memory.pk, gist="Second", source=ChangeSource.DASHBOARD)
    revision = Revision.objects.get(memory=memory)

    with unchanged():
        page, _ = preview_of(logged_in, revision, "before")
    assert page.text.lstrip().startswith("<!doctype html>")
    assert "Restore as it was before this change?" in page.text

    response = confirmed(logged_in, revision, "before")

    assert response.status_code == 302
    assert response["Location"] == detail_url(memory)
    assert stored(memory).gist == "First"


def test_a_restore_shows_each_field_now_and_then_before_asking(logged_in, user, make_memory):
    """The case that reverted five later edits unasked: restoring "after" an old archive."""
    memory = make_memory(gist="Plan the garden", salience="medium", tags=["garden"])
    archive(owner=user, memory_id=memory.pk, reason="done", source=ChangeSource.TOOL)
    archived = Revision.objects.get(memory=memory)
    unarchive(owner=user, memory_id=memory.pk, source=ChangeSource.TOOL)
    edit_gist(owner=user, memory_id=memory.pk, gist="Plan the orchard", source=ChangeSource.TOOL)
    set_curation(owner=user, memory_id=memory.pk, salience="high", source=ChangeSource.DASHBOARD)
    set_curation(owner=user, memory_id=memory.pk, core=True, source=ChangeSource.DASHBOARD)

    with unchanged():
        response, version = preview_of(logged_in, archived, "after", **htmx())

    assert version
    archived_at = archived.after["archived_at"]
    assert preview_rows(response.text) == [
        ("gist", "Plan the orchard", "Plan the garden"),
        ("salience", "high", "medium"),
        ("core", "yes", "no"),
        ("archived at", "—", archived_at),
        ("archive reason", "—", "done"),
    ]
    assert "Restore 5 fields" in response.text
    assert "Keep it as it is" in response.text


def test_a_restore_posted_without_a_preview_asks_instead(logged_in, user, make_memory):
    memory = make_memory(gist="First")
    edit_gist(owner=user, memory_id=memory.pk, gist="Second", source=ChangeSource.DASHBOARD)
    revision = Revision.objects.get(memory=memory)

    for data in ({"use": "before"}, {"use": "before", "version": "not-a-version"}):
        with unchanged(data):
            response = logged_in.post(restore_url(revision), data, **htmx())
        assert response.status_code == 200
        assert preview_rows(response.text) == [("gist", "Second", "First")]


def test_a_memory_changed_since_the_preview_is_not_restored_and_the_new_preview_shown(
    logged_in, user, make_memory
):
    memory = make_memory(gist="First", salience="medium")
    edit_gist(owner=user, memory_id=memory.pk, gist="Second", source=ChangeSource.DASHBOARD)
    revision = Revision.objects.get(memory=memory)
    _, version = preview_of(logged_in, revision, "before", **htmx())
    # Meanwhile, in another window (or Claude):
    set_curation(owner=user, memory_id=memory.pk, salience="low", source=ChangeSource.TOOL)
    edit_gist(owner=user, memory_id=memory.pk, gist="Third", source=ChangeSource.TOOL)

    with unchanged():
        response = logged_in.post(
            restore_url(revision), {"use": "before", "version": version}, **htmx()
        )

    assert response.status_code == 409
    assert "Nothing was restored: this memory changed after you looked" in response.text
    # The new preview, as the memory is now: it would undo both of those edits.
    assert preview_rows(response.text) == [
        ("gist", "Third", "First"),
        ("salience", "low", "medium"),
    ]
    assert VERSION.search(response.text).group(1) != version


def test_a_restore_that_would_change_nothing_says_so(logged_in, user, make_memory):
    memory = make_memory(gist="First")
    edit_gist(owner=user, memory_id=memory.pk, gist="Second", source=ChangeSource.DASHBOARD)
    revision = Revision.objects.get(memory=memory)

    response, version = preview_of(logged_in, revision, "after", **htmx())

    assert version is None  # nothing to confirm
    assert "restoring would change nothing" in response.text


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


def test_the_page_says_what_updated_means_and_shows_the_last_change(logged_in, user, make_memory):
    memory = make_memory(gist="Walks at dawn")
    html = logged_in.get(detail_url(memory)).text
    assert '<dt>last change</dt><dd class="last-change">none since it was written</dd>' in html

    set_curation(owner=user, memory_id=memory.pk, salience="high", source=ChangeSource.DASHBOARD)
    html = logged_in.get(detail_url(memory)).text

    # The dashboard's edit leaves updated_at where it was, and the page says why.
    assert stored(memory).updated_at == memory.updated_at
    assert "your edits here, archiving and restores leave this date alone" in html
    last = Revision.objects.get(memory=memory)
    change = html.split('<dd class="last-change">', 1)[1].split("</dd>", 1)[0]
    assert f'datetime="{last.created_at.isoformat()}"' in change
    assert "curate via dashboard" in change
