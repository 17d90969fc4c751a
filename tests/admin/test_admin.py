import re
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from mcp_bridge import handlers
from memories import services
from memories.conf import embedder
from memories.models import Closing, Memory, MemoryTag, Revision, Snapshot
from memories.services import migrate
from tests.conftest import NOW
from tests.page_text import page_text

pytestmark = pytest.mark.django_db

CHANGELIST = reverse("admin:memories_memory_changelist")
SCRIPT = "<script>alert('x')</script>"
ESCAPED = "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;"


def change_url(memory):
    return reverse("admin:memories_memory_change", args=[memory.pk])


def listed(response):
    return {m.pk for m in response.context["cl"].result_list}


@pytest.fixture
def theirs(other_user, make_memory):
    return make_memory(owner=other_user, gist="Bob's memory", category="identity")


def test_the_list_shows_every_users_memories_with_their_columns(admin_client, make_memory, theirs):
    mine = make_memory(
        gist="Alice likes tea",
        category="relationship",
        salience="high",
        core=True,
        retrieval_count=3,
    )

    response = admin_client.get(CHANGELIST)

    assert response.status_code == 200
    assert listed(response) == {mine.pk, theirs.pk}
    page = response.content.decode()
    for text in ("Alice likes tea", "relationship", "high", "alice", "bob", "Bob&#x27;s memory"):
        assert text in page
    headers = [
        h.lower() for h in re.findall(r'<th scope="col"[^>]*>.*?<a [^>]*>([^<]+)</a>', page, re.S)
    ]
    for column in (
        "gist",
        "category",
        "salience",
        "core",
        "archived",
        "last touched at",
        "retrieval count",
        "owner",
    ):
        assert column in headers


def test_the_list_filter_and_change_page_spell_a_category_as_the_dashboard_does(
    admin_client, make_memory
):
    thread = make_memory(gist="Drafting chapter three", category="active_thread")
    make_memory(gist="An old name", category="active_threads")  # drifted, still filterable

    listing = admin_client.get(CHANGELIST)
    filtered = admin_client.get(CHANGELIST, {"category": "active_thread"})
    change = admin_client.get(change_url(thread))

    for response in (listing, filtered, change):
        text = page_text(response.content.decode())
        assert "active thread" in text
        assert "active_thread" not in text
        assert "Active Thread" not in text
    assert "By category All active thread active threads" in page_text(listing.content.decode())
    assert listed(filtered) == {thread.pk}
    assert 'href="?category=active_thread"' in listing.content.decode()  # the stored value


def test_the_list_query_count_does_not_grow_with_the_page(admin_client, make_memory):
    make_memory()
    with CaptureQueriesContext(connection) as few:
        admin_client.get(CHANGELIST)
    for _ in range(15):
        make_memory()

    with CaptureQueriesContext(connection) as many:
        admin_client.get(CHANGELIST)

    assert len(many) == len(few)


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("category=identity", {"identity"}),
        ("category=event", {"event"}),
        ("salience=high", {"high-one"}),
        ("core__exact=1", {"core-one"}),
        ("archived=yes", {"archived-one"}),
        ("archived=no", {"identity", "event", "high-one", "core-one", "bob"}),
    ],
)
def test_filters(admin_client, make_memory, other_user, query, expected):
    make_memory(gist="identity", category="identity")
    make_memory(gist="event", category="event")
    make_memory(gist="high-one", salience="high")
    make_memory(gist="core-one", core=True)
    make_memory(gist="archived-one", archived_at=NOW)
    make_memory(gist="bob", owner=other_user)

    response = admin_client.get(f"{CHANGELIST}?{query}")

    assert {m.gist for m in response.context["cl"].result_list} == expected


def test_filter_by_owner(admin_client, make_memory, theirs, other_user):
    make_memory()

    response = admin_client.get(f"{CHANGELIST}?owner__id__exact={other_user.pk}")

    assert listed(response) == {theirs.pk}


@pytest.mark.parametrize("term", ["marmalade", "Seville", "preserves"])
def test_search_looks_at_gist_content_and_tags(admin_client, make_memory, term):
    wanted = make_memory(
        gist="Marmalade recipe", content="Use Seville oranges.", tags=["Preserves"]
    )
    make_memory(gist="Something else", content="Nothing to see.", tags=["other"])

    response = admin_client.get(CHANGELIST, {"q": term})

    assert listed(response) == {wanted.pk}


def test_search_by_full_id(admin_client, make_memory):
    wanted = make_memory()
    make_memory()

    response = admin_client.get(CHANGELIST, {"q": str(wanted.pk)})

    assert listed(response) == {wanted.pk}


def run_action(client, action, memories):
    return client.post(
        CHANGELIST,
        {"action": action, "_selected_action": [str(m.pk) for m in memories]},
        follow=True,
    )


def test_bulk_archive_goes_through_the_service(admin_client, make_memory, theirs):
    mine = make_memory(updated_at=NOW - timedelta(days=5), tags=["kept"])

    response = run_action(admin_client, "archive_memories", [mine, theirs])

    assert "Archived: 2 memories" in response.content.decode()
    for memory in (mine, theirs):
        fresh = Memory.objects.get(pk=memory.pk)
        assert fresh.archived_at is not None
        assert fresh.archive_reason == "archived in the admin"
        assert fresh.updated_at == memory.updated_at
        revision = Revision.objects.get(memory=memory)
        assert (revision.source, revision.owner_id) == ("admin", memory.owner_id)
    assert MemoryTag.objects.filter(memory=mine, key="kept").exists()
    assert handlers.recall(owner=mine.owner, tags=["kept"], now=NOW)["count"] == 0


def test_bulk_unarchive(admin_client, make_memory, user, other_user):
    archived = [
        make_memory(archived_at=NOW, tags=["back"]),
        make_memory(owner=other_user, archived_at=NOW),
    ]

    run_action(admin_client, "unarchive_memories", archived)

    assert not Memory.objects.archived().exists()
    found = handlers.recall(owner=user, tags=["back"], now=NOW)
    assert [r["id"] for r in found["results"]] == [str(archived[0].pk)]
    assert set(Revision.objects.values_list("source", "action")) == {("admin", "unarchive")}


@pytest.mark.parametrize("salience", ["high", "medium", "low"])
def test_bulk_set_salience(admin_client, make_memory, theirs, salience):
    mine = make_memory(salience="low" if salience != "low" else "high")
    theirs_before = theirs.salience

    run_action(admin_client, f"set_salience_{salience}", [mine, theirs])

    for memory in (mine, theirs):
        fresh = Memory.objects.get(pk=memory.pk)
        assert fresh.salience == salience
        assert fresh.updated_at == memory.updated_at
    revision = Revision.objects.get(memory=mine)
    assert (revision.source, revision.after["salience"]) == ("admin", salience)
    assert Revision.objects.filter(memory=theirs).exists() == (theirs_before != salience)


def test_bulk_add_to_and_remove_from_core(admin_client, make_memory, theirs):
    mine = make_memory()

    run_action(admin_client, "add_to_core", [mine, theirs])
    assert set(Memory.objects.values_list("core", flat=True)) == {True}

    run_action(admin_client, "remove_from_core", [mine])

    assert Memory.objects.get(pk=mine.pk).core is False
    assert Memory.objects.get(pk=theirs.pk).core is True
    assert Memory.objects.get(pk=mine.pk).updated_at == mine.updated_at
    assert list(
        Revision.objects.filter(memory=mine)
        .order_by("created_at", "id")
        .values_list("after__core", flat=True)
    ) == [True, False]


def form_data(memory, **changes):
    data = {"gist": memory.gist, "salience": memory.salience, "core": "on" if memory.core else ""}
    data.update(changes)
    return {k: v for k, v in data.items() if v != ""}


@pytest.fixture
def save_change(admin_client, django_capture_on_commit_callbacks):
    """Posts the change form as the admin does in use: the edit runs once the view's
    transaction commits, which inside a test's own transaction must be asked for."""

    def save(memory, **changes):
        with django_capture_on_commit_callbacks(execute=True):
            return admin_client.post(change_url(memory), form_data(memory, **changes))

    return save


def test_a_gist_edit_keeps_a_revision_and_recall_finds_the_new_words(
    save_change, make_memory, user
):
    memory = make_memory(
        gist="Old words here", content="Body text.", gist_autogenerated=True, updated_at=NOW
    )

    response = save_change(memory, gist="Lighthouse keeper")

    assert response.status_code == 302
    fresh = Memory.objects.get(pk=memory.pk)
    assert (fresh.gist, fresh.gist_autogenerated) == ("Lighthouse keeper", False)
    assert fresh.updated_at == NOW
    revision = Revision.objects.get(memory=memory)
    assert (revision.source, revision.before["gist"]) == ("admin", "Old words here")
    found = handlers.recall(owner=user, query="lighthouse", now=NOW)
    assert [r["id"] for r in found["results"]] == [str(memory.pk)]
    assert handlers.recall(owner=user, query="old", now=NOW)["count"] == 0


def test_salience_and_core_edits_in_the_form_go_through_the_service(save_change, make_memory):
    memory = make_memory(salience="medium", core=False)

    save_change(memory, salience="high", core="on")

    fresh = Memory.objects.get(pk=memory.pk)
    assert (fresh.salience, fresh.core, fresh.updated_at) == ("high", True, memory.updated_at)
    assert Revision.objects.get(memory=memory).changed_fields == ["salience", "core"]


def test_one_save_of_gist_and_salience_is_one_change_with_one_revision(save_change, make_memory):
    memory = make_memory(gist="Old words", salience="medium")

    save_change(memory, gist="New words", salience="high")

    (revision,) = Revision.objects.filter(memory=memory)
    assert revision.action == "edit"
    assert revision.changed_fields == ["gist", "salience"]


@pytest.mark.django_db(transaction=True)
def test_a_gist_edit_is_embedded_before_its_write_transaction(admin_user, make_memory, monkeypatch):
    """The admin's change view runs without Django's own transaction around the save, so
    the service embeds the new gist first, holding no write lock (SQLite's only one)."""
    from django.test import Client

    memory = make_memory(gist="Old words here")
    semantic = embedder()
    if semantic is None:
        pytest.skip("recall by meaning is off")
    inside: list[bool] = []
    real_embed = type(semantic).embed

    def noting(self, texts):
        inside.append(connection.in_atomic_block)
        return real_embed(self, texts)

    monkeypatch.setattr(type(semantic), "embed", noting)
    client = Client()
    client.force_login(admin_user)

    response = client.post(change_url(memory), form_data(memory, gist="Lighthouse keeper"))

    assert response.status_code == 302
    assert Memory.objects.get(pk=memory.pk).gist == "Lighthouse keeper"
    assert inside == [False]


def test_content_cannot_be_changed_in_the_form(save_change, make_memory):
    memory = make_memory(content="Original content.", category="identity")

    save_change(memory, content="Changed!", category="error")

    fresh = Memory.objects.get(pk=memory.pk)
    assert (fresh.content, fresh.category) == ("Original content.", "identity")
    assert not Revision.objects.exists()


def test_a_blank_gist_is_refused_in_the_form(save_change, make_memory):
    memory = make_memory(gist="Keep me")

    response = save_change(memory, gist="   ")

    assert response.status_code == 200
    assert response.context["adminform"].form.errors
    assert Memory.objects.get(pk=memory.pk).gist == "Keep me"


@pytest.mark.django_db(transaction=True)
def test_an_edit_the_service_refuses_is_reported_as_a_message(admin_user, make_memory, monkeypatch):
    from django.test import Client

    memory = make_memory(gist="Keep me")
    real_edit = services.edit

    def deleted_first(**arguments):
        # Another request deletes the memory between the form's check and the edit.
        Memory.objects.filter(pk=memory.pk).delete()
        return real_edit(**arguments)

    monkeypatch.setattr(services, "edit", deleted_first)
    client = Client()
    client.force_login(admin_user)

    response = client.post(change_url(memory), form_data(memory, gist="New words"))

    assert response.status_code == 302
    shown = [str(m) for m in client.get(response.url).context["messages"]]
    assert any(m.startswith("The change was not saved: ") for m in shown), shown
    assert not Revision.objects.exists()


def test_markup_in_memory_text_is_shown_as_text(admin_client, make_memory):
    memory = make_memory(gist=f"Gist {SCRIPT}", content=f"Content {SCRIPT}", tags=[SCRIPT])

    for url in (CHANGELIST, change_url(memory)):
        page = admin_client.get(url).content.decode()
        assert SCRIPT not in page
        assert ESCAPED in page


def test_memories_cannot_be_added_in_the_admin(admin_client):
    assert admin_client.get(reverse("admin:memories_memory_add")).status_code == 403


def test_deleting_in_the_admin_removes_the_memory(admin_client, make_memory):
    memory = make_memory()

    admin_client.post(reverse("admin:memories_memory_delete", args=[memory.pk]), {"post": "yes"})

    assert not Memory.objects.filter(pk=memory.pk).exists()


def test_staff_without_superuser_see_only_their_own_memories(client, make_memory, theirs, user):
    from django.contrib.auth.models import Permission

    user.is_staff = True
    user.save()
    user.user_permissions.add(Permission.objects.get(codename="view_memory"))
    mine = make_memory()
    client.force_login(user)

    response = client.get(CHANGELIST)

    assert listed(response) == {mine.pk}


def test_revisions_closings_and_snapshots_are_viewable_and_read_only(
    admin_client, make_memory, user
):
    memory = make_memory(category="event", content=f"Drifted {SCRIPT}")
    migrate(owner=user, now=NOW)
    closing = Closing.objects.create(owner=user, reflection=f"Bye {SCRIPT}", created_at=NOW)
    revision = Revision.objects.get(memory=memory)
    snapshot = Snapshot.objects.get()

    for name, obj in (("revision", revision), ("closing", closing), ("snapshot", snapshot)):
        listing = admin_client.get(reverse(f"admin:memories_{name}_changelist"))
        detail = admin_client.get(reverse(f"admin:memories_{name}_change", args=[obj.pk]))
        assert listing.status_code == detail.status_code == 200
        assert SCRIPT not in listing.content.decode() + detail.content.decode()
        assert admin_client.get(reverse(f"admin:memories_{name}_add")).status_code == 403
        assert 'type="submit" value="Save"' not in detail.content.decode()
    snapshot_page = admin_client.get(
        reverse("admin:memories_snapshot_change", args=[snapshot.pk])
    ).content.decode()
    assert f"manage.py restore_snapshot {snapshot.pk}" in snapshot_page
    assert "before-migrate" in snapshot_page
    assert (
        "Bye &lt;script&gt;"
        in admin_client.get(
            reverse("admin:memories_closing_change", args=[closing.pk])
        ).content.decode()
    )


def test_the_admin_calls_memories_memories(admin_client):
    index = page_text(admin_client.get(reverse("admin:index")).content.decode())
    assert "Memories" in index and "Memorys" not in index
    changelist = page_text(admin_client.get(CHANGELIST).content.decode())
    assert "Select memory to change" in changelist and "0 memories" in changelist
