"""What one edit on the dashboard costs in queries, pinned: the memory is read once by the
service that changes it, the write follows, and the card and the page's header and
preview are built from what the service returned, never by reading the row again."""

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from memories import services
from memories.models import ChangeSource, Memory, Revision
from tests.dashboard.conftest import htmx

pytestmark = pytest.mark.django_db

# Every htmx edit below pays for the request (the session and the user: 2) and for what
# it refreshes: the card's short id, and the header counts and the preview, built from the
# reflect payload's reads (6, one more when the store has a core memory).
REQUEST = 2
OVERVIEW = 6
AROUND = REQUEST + 1 + OVERVIEW
# The write of a memory whose text stays: the savepoint of the service's transaction, the
# memory read under its lock, its update, its revision, the recall entry read and
# updated, the owner's index version moved and the change recorded, and the release.
CURATION = 9

EDITS = {
    # (path, data, queries): archiving also drops the recall entry (its tokens cascade).
    "salience": ("curate", {"salience": "high"}, AROUND + CURATION),
    # A core memory more: the preview reads the core tier's text too.
    "core": ("curate", {"salience": "medium", "core": ["false", "true"]}, AROUND + CURATION + 1),
    "archive": ("archive", {}, AROUND + CURATION),
    # Back in recall: the entry is inserted, not updated, and its tokens with it.
    "unarchive": ("unarchive", {}, AROUND + CURATION + 1),
    # The gist is embedded before the transaction, from the memory as read without a lock:
    # read twice, by design; its tokens, tags and vector are rewritten (6 statements more).
    "gist": ("gist", {"gist": "Dawn walker"}, AROUND + 1 + CURATION + 6),
}


@pytest.fixture
def memory(make_memory):
    return make_memory(
        gist="Walks at dawn",
        content="Likes to walk at dawn before work.",
        tags=["walks"],
        updated_at=timezone.now() - timedelta(days=10),
    )


def queries_of(client, path, data):
    with CaptureQueriesContext(connection) as captured:
        response = client.post(path, data, **htmx())
    assert response.status_code == 200
    return [query["sql"] for query in captured.captured_queries]


@pytest.mark.parametrize("edit", list(EDITS))
def test_an_edit_reads_its_memory_once_and_the_page_from_what_it_returned(logged_in, memory, edit):
    action, data, expected = EDITS[edit]
    if edit == "unarchive":
        services.archive(owner=memory.owner, memory_id=memory.pk, source=ChangeSource.DASHBOARD)
        Revision.objects.filter(memory=memory).delete()
    logged_in.get("/dashboard/")  # the session as it is after the first page
    sql = queries_of(logged_in, f"/dashboard/memories/{memory.pk}/{action}/", data)

    table = Memory._meta.db_table
    full_reads = [q for q in sql if q.startswith(f'SELECT "{table}"."id", "{table}"."owner_id"')]
    assert len(full_reads) == (2 if edit == "gist" else 1), sql
    assert Revision.objects.filter(memory=memory).count() == 1
    if expected is not None:
        assert len(sql) == expected, "\n".join(sql)


def test_applying_a_suggestion_reads_its_memory_once(logged_in, make_memory):
    memory = make_memory(retrieval_count=9, last_retrieved=timezone.now())
    logged_in.get("/dashboard/")
    sql = queries_of(logged_in, f"/dashboard/suggestions/{memory.pk}/promote/apply/", {})
    table = Memory._meta.db_table
    # The service's locked read alone; the panel after it comes from the suggestions' own
    # queries (one a kind).
    full_reads = [q for q in sql if q.startswith(f'SELECT "{table}"."id", "{table}"."owner_id"')]
    assert len(full_reads) == 1, sql
    # The rule asked again under the lock (one query); the message names the memory by its
    # short id; the promoted memory is core now.
    assert len(sql) == REQUEST + CURATION + 1 + 1 + OVERVIEW + 1 + 3, "\n".join(sql)


def test_restoring_a_revision_reads_the_memory_for_the_page_once(logged_in, make_memory):
    memory = make_memory(gist="Walks at dawn")
    services.set_curation(
        owner=memory.owner, memory_id=memory.pk, salience="high", source=ChangeSource.DASHBOARD
    )
    revision = Revision.objects.get(memory=memory)
    url = f"/dashboard/revisions/{revision.pk}/restore/"
    asked = logged_in.get(url, {"use": "before"}, **htmx()).text
    version = asked.split('name="version" value="', 1)[1].split('"', 1)[0]
    sql = queries_of(logged_in, url, {"use": "before", "version": version})
    table = Memory._meta.db_table
    full_reads = [q for q in sql if q.startswith(f'SELECT "{table}"."id", "{table}"."owner_id"')]
    # Read to embed its restored text first, then under the lock; the page is drawn from
    # what the service returned, with the revisions and the short ids read for it.
    assert len(full_reads) == 2, sql
    assert len(sql) == REQUEST + 1 + 1 + CURATION + 2, "\n".join(sql)
