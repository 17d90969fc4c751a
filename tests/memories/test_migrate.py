from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from mcp_bridge import handlers
from memories import services
from memories.models import Memory, MemoryTag, Revision, Snapshot
from memories.services.normalise import (
    auto_gist,
    migrate,
    normalise,
    normalise_list,
    normalise_salience,
)
from tests.conftest import NOW
from tests.store import stored_columns

pytestmark = pytest.mark.django_db

LATER = NOW + timedelta(days=2)


@pytest.mark.parametrize(
    ("legacy", "canonical"),
    [
        ("active_threads", "active_thread"),
        ("identity_observations", "identity"),
        ("relationship_texture", "relationship"),
        ("event", "episodic"),
        ("project", "active_thread"),
        ("completed_project", "episodic"),
        ("undefined", "error"),
        ("banana", "error"),
        ("", "error"),
        ("  Identity ", "identity"),
        ("  PROJECT", "active_thread"),
    ],
)
def test_categories_are_mapped_to_canonical_ones(make_memory, user, legacy, canonical):
    memory = make_memory(category=legacy)

    migrate(owner=user, now=LATER)

    assert Memory.objects.get(pk=memory.pk).category == canonical


@pytest.mark.parametrize(
    ("drifted", "canonical"),
    [
        ("3", "high"),
        ("2", "medium"),
        ("1", "low"),
        (" 3 ", "high"),
        (3, "high"),  # saved through the ORM as the string "3"
        ("HIGH", "high"),
        (" Low", "low"),
        ("urgent", "medium"),
        ("4", "medium"),
        ("", "medium"),
    ],
)
def test_salience_is_mapped_to_canonical_values(make_memory, user, drifted, canonical):
    memory = make_memory(salience=drifted)

    migrate(owner=user, now=LATER)

    assert Memory.objects.get(pk=memory.pk).salience == canonical


@pytest.mark.parametrize(
    ("drifted", "canonical"),
    [(3, "high"), (2.0, "medium"), (1, "low"), (7, "medium"), (True, "medium"), (None, "medium")],
)
def test_numeric_salience_values_are_read_as_numbers(drifted, canonical):
    assert normalise_salience(drifted) == canonical


@pytest.mark.parametrize(
    ("drifted", "clean"),
    [
        ('["work", "tea"]', ["work", "tea"]),
        (' ["spaced"] ', ["spaced"]),
        ("solo", ["solo"]),
        ("[not json", ["[not json"]),
        ('{"a": 1}', ['{"a": 1}']),
        ("   ", []),
        (["kept", 3, None, {"x": 1}, "also"], ["kept", "also"]),
        ('["a", 2, "b"]', ["a", "b"]),
        (None, []),
        (42, []),
    ],
)
def test_list_fields_are_parsed_and_cleaned(drifted, clean):
    assert normalise_list(drifted) == clean


def test_every_list_field_of_a_stored_memory_is_normalised(make_memory, user):
    link = make_memory()
    memory = make_memory(
        tags="solo",
        search_keywords='["alpha", "beta"]',
        linked_memories=f'["{link.pk}"]',
    )
    mixed = make_memory(tags=["kept", 3, None, {"x": 1}], search_keywords='["a", 2, "b"]')

    migrate(owner=user, now=LATER)

    fresh = Memory.objects.get(pk=memory.pk)
    assert fresh.tags == ["solo"]
    assert fresh.search_keywords == ["alpha", "beta"]
    assert fresh.linked_memories == [str(link.pk)]
    fresh_mixed = Memory.objects.get(pk=mixed.pk)
    assert (fresh_mixed.tags, fresh_mixed.search_keywords) == (["kept"], ["a", "b"])


@pytest.mark.parametrize(
    ("content", "gist"),
    [
        ("I like tea. And also coffee.", "I like tea."),
        ("Is this it? Yes.", "Is this it?"),
        ("Stop! Now.", "Stop!"),
        ("Version 2.5 shipped today. Then more.", "Version 2.5 shipped today."),
        ("Line one.\nLine two.", "Line one."),
        ("No terminator at all", "No terminator at all"),
        ("Ends with a dot.", "Ends with a dot."),
        ("Really?! Yes indeed.", "Really?!"),
        (
            "one two three four five six seven eight nine ten eleven twelve thirteen "
            "fourteen fifteen.",
            "one two three four five six seven eight nine ten eleven twelve thirteen "
            "fourteen fifteen.",
        ),
        (
            "one two three four five six seven eight nine ten eleven twelve thirteen "
            "fourteen fifteen sixteen. Second sentence.",
            "one two three four five six seven eight nine ten eleven twelve thirteen "
            "fourteen fifteen…",
        ),
        ("  Leading   spaces   collapse.  Next.", "Leading spaces collapse."),
    ],
)
def test_auto_gist_takes_the_first_sentence_up_to_fifteen_words(content, gist):
    assert auto_gist(content) == gist


def test_an_auto_gist_of_huge_words_still_fits_the_gist_limit():
    gist = auto_gist("x" * 5000)

    assert len(gist) == 300
    assert gist.endswith("…")


@pytest.mark.parametrize("missing", ["", "   "])
def test_a_missing_gist_is_made_from_the_content_and_flagged(make_memory, user, missing):
    memory = make_memory(gist=missing, content="Walks the dog at six. Every day.")

    migrate(owner=user, now=LATER)

    fresh = Memory.objects.get(pk=memory.pk)
    assert fresh.gist == "Walks the dog at six."
    assert fresh.gist_autogenerated is True


def test_a_written_gist_is_kept(make_memory, user):
    memory = make_memory(gist="My own words", category="event")

    migrate(owner=user, now=LATER)

    fresh = Memory.objects.get(pk=memory.pk)
    assert fresh.gist == "My own words"
    assert fresh.gist_autogenerated is False


def test_epistemic_status_and_counters_get_canonical_values_or_defaults(make_memory, user):
    odd = make_memory(epistemic_status=" Observed", replication_count=-3)
    unknown = make_memory(epistemic_status="probably")

    migrate(owner=user, now=LATER)

    assert Memory.objects.get(pk=odd.pk).epistemic_status == "observed"
    assert Memory.objects.get(pk=odd.pk).replication_count == 0
    assert Memory.objects.get(pk=unknown.pk).epistemic_status == "unvalidated"


def test_created_at_falls_back_to_updated_at(user):
    memory = Memory(
        owner=user,
        category="episodic",
        content="No creation time.",
        gist="No creation time",
        created_at=None,
        updated_at=NOW,
        last_touched_at=NOW,
    )

    changed = normalise(memory)

    assert "created_at" in changed
    assert memory.created_at == NOW


def test_content_updated_at_and_last_touch_are_never_changed(make_memory, user):
    memory = make_memory(
        category="event",
        salience="3",
        gist="",
        tags="x",
        content="  Odd   spacing, kept as written.  ",
        updated_at=NOW - timedelta(days=100),
        last_retrieved=NOW - timedelta(days=10),
    )
    before = stored_columns(memory)

    migrate(owner=user, now=LATER)

    after = stored_columns(memory)
    assert after["content"] == before["content"]
    assert after["updated_at"] == before["updated_at"]
    assert after["last_touched_at"] == NOW - timedelta(days=10)
    assert after["created_at"] == before["created_at"]


def test_a_snapshot_of_the_affected_records_is_written_before_any_change(make_memory, user):
    drifted = make_memory(category="event", salience="3", tags="solo")
    make_memory()  # already canonical: not part of the snapshot

    reply = migrate(owner=user, now=LATER)

    snapshot = Snapshot.objects.get(pk=reply.snapshot_ids[0])
    assert snapshot.reason == "before-migrate"
    assert snapshot.owner == user
    assert snapshot.memory_count == 1
    assert snapshot.records["whole_store"] is False
    [value] = snapshot.records["memories"]
    assert value["id"] == str(drifted.pk)
    assert (value["category"], value["salience"], value["tags"]) == ("event", "3", "solo")


def test_the_reply_counts_records_and_categories(make_memory, user):
    make_memory(category="event")
    make_memory(category="project")
    make_memory(category="episodic")
    make_memory(category="identity")

    reply = migrate(owner=user, now=LATER)

    assert reply.dry_run is False
    assert (reply.migrated, reply.total) == (2, 4)
    assert reply.counts_before == {
        "episodic": 1,
        "event": 1,
        "identity": 1,
        "project": 1,
    }
    assert reply.counts_after == {"active_thread": 1, "episodic": 2, "identity": 1}


def test_a_second_run_changes_nothing_and_writes_no_snapshot(make_memory, user):
    make_memory(category="event", gist="", tags='["a"]')
    make_memory(salience="1")
    migrate(owner=user, now=LATER)
    state = [stored_columns(m) for m in Memory.objects.all()]
    snapshots, revisions = Snapshot.objects.count(), Revision.objects.count()

    reply = migrate(owner=user, now=LATER + timedelta(hours=1))

    assert (reply.migrated, reply.total) == (0, 2)
    assert reply.snapshot_ids == []
    assert "nothing changed" in reply.message
    assert [stored_columns(m) for m in Memory.objects.all()] == state
    assert (Snapshot.objects.count(), Revision.objects.count()) == (snapshots, revisions)


def test_a_dry_run_reports_what_would_change_and_changes_nothing(make_memory, user):
    memory = make_memory(category="event", salience="3", gist="", tags="solo")
    make_memory()
    before = stored_columns(memory)

    reply = migrate(owner=user, dry_run=True, now=LATER)

    assert reply.dry_run is True
    assert (reply.migrated, reply.total) == (1, 2)
    assert reply.snapshot_ids == []
    assert reply.counts_after == {"episodic": 2}
    assert "Nothing was changed" in reply.message
    assert stored_columns(memory) == before
    assert not Snapshot.objects.exists()
    assert not Revision.objects.exists()


def test_tracked_changes_keep_a_revision_from_migrate(make_memory, user):
    memory = make_memory(category="event", salience="3")
    untracked = make_memory(search_keywords="kw")

    migrate(owner=user, now=LATER)

    revision = Revision.objects.get(memory=memory)
    assert revision.source == "migrate"
    assert revision.created_at == LATER
    assert set(revision.changed_fields) == {"category", "salience"}
    assert (revision.before["category"], revision.before["salience"]) == ("event", "3")
    assert (revision.after["category"], revision.after["salience"]) == ("episodic", "high")
    assert not Revision.objects.filter(memory=untracked).exists()
    assert Memory.objects.get(pk=untracked.pk).search_keywords == ["kw"]


def test_recall_reads_the_normalised_fields(make_memory, user):
    memory = make_memory(
        gist="",
        content="Marmalade recipe from grandmother. With oranges.",
        tags='["kitchen", "family"]',
    )

    migrate(owner=user, now=LATER)

    assert set(MemoryTag.objects.filter(memory=memory).values_list("key", flat=True)) == {
        "kitchen",
        "family",
    }
    by_tag = handlers.recall(owner=user, tags=["family"], now=LATER)
    assert [r["id"] for r in by_tag["results"]] == [str(memory.pk)]
    by_gist = handlers.recall(owner=user, query="grandmother", now=LATER)
    assert [r["id"] for r in by_gist["results"]] == [str(memory.pk)]


def test_migrate_for_one_owner_leaves_other_users_alone(make_memory, user, other_user):
    mine = make_memory(category="event")
    theirs = make_memory(owner=other_user, category="event")

    migrate(owner=user, now=LATER)

    assert Memory.objects.get(pk=mine.pk).category == "episodic"
    assert Memory.objects.get(pk=theirs.pk).category == "event"


def test_migrate_without_an_owner_covers_every_user_with_a_snapshot_each(
    make_memory, user, other_user
):
    make_memory(category="event")
    make_memory(owner=other_user, category="project")
    make_memory(owner=other_user)

    reply = migrate(now=LATER)

    assert (reply.migrated, reply.total) == (2, 3)
    assert len(reply.snapshot_ids) == 2
    assert {s.owner_id for s in Snapshot.objects.all()} == {user.pk, other_user.pk}
    assert sorted((o.username, o.migrated) for o in reply.owners) == [
        ("alice", 1),
        ("bob", 1),
    ]
    assert not Memory.objects.exclude(category__in=["episodic", "active_thread"]).exists()


def test_migrate_is_exported_by_the_services_package(make_memory, user):
    make_memory(category="event")

    reply = services.migrate(owner=user, now=LATER)

    assert reply.migrated == 1


def _count_queries(user, make_memory, n):
    for i in range(n):
        make_memory(category="event", gist="", tags=f'["t{i}"]', content=f"Memory {i}. More.")
    with CaptureQueriesContext(connection) as queries:
        migrate(owner=user, now=LATER)
    Memory.objects.all().delete()
    return len(queries)


def test_migrate_runs_a_fixed_number_of_queries_whatever_the_store_size(user, make_memory):
    few = _count_queries(user, make_memory, 3)
    many = _count_queries(user, make_memory, 60)

    assert many == few


def test_a_stored_list_field_of_json_text_nested_too_deeply_is_kept_as_one_item(make_memory, user):
    deep = "[" * 100_000 + "]" * 100_000
    memory = make_memory(tags=deep)

    migrate(owner=user, now=LATER)

    assert Memory.objects.get(pk=memory.pk).tags == [deep]


# A store with nothing to repair: migrate only reads, and not the content.


def test_may_need_normalising_flags_every_memory_normalise_would_change(make_memory):
    from memories.services.normalise import may_need_normalising

    drifted = [
        {"category": "event"},
        {"category": " identity"},
        {"salience": "3"},
        {"epistemic_status": "Observed"},
        {"replication_count": -1},
        {"compression_level": -2},
        {"tags": "solo"},
        {"search_keywords": ["ok", 3]},
        {"linked_memories": '["x"]'},
        {"gist": ""},
        {"gist": "   "},
        {"gist_hash": "stale"},
        {"content_hash": ""},
        {"last_touched_at": NOW - timedelta(days=3)},
    ]
    for overrides in [{}, *drifted]:
        memory = make_memory(**overrides)
        if "gist_hash" in overrides or "content_hash" in overrides:
            Memory.objects.filter(pk=memory.pk).update(**overrides)
        read = Memory.objects.defer("content").get(pk=memory.pk)
        whole = Memory.objects.get(pk=memory.pk)

        with CaptureQueriesContext(connection) as queries:
            flagged = may_need_normalising(read)

        assert len(queries) == 0, "it must not load the deferred content"
        assert flagged == bool(normalise(whole)) == bool(overrides), overrides


CONTENT_COLUMN = '"memories_memory"."content"'


def test_migrate_with_nothing_to_change_reads_no_content_and_opens_no_transaction(
    make_memory, user
):
    for n in range(5):
        make_memory(content=f"Memory {n}. Already clean.", tags=[f"t{n}"])

    with CaptureQueriesContext(connection) as queries:
        reply = migrate(owner=user, now=LATER)

    assert (reply.migrated, reply.total) == (0, 5)
    sql = [q["sql"] for q in queries]
    assert not [s for s in sql if CONTENT_COLUMN in s]
    assert all(s.lstrip().upper().startswith("SELECT") for s in sql), sql


def test_migrate_loads_the_content_of_drifted_memories_only(make_memory, user):
    for n in range(5):
        make_memory(content=f"Clean memory {n}.")
    drifted = make_memory(category="event", content="The drifted one.")

    with CaptureQueriesContext(connection) as queries:
        reply = migrate(owner=user, now=LATER)

    assert reply.migrated == 1
    reads = [q["sql"] for q in queries if CONTENT_COLUMN in q["sql"] and "SELECT" in q["sql"]]
    # Once to embed its new text ahead of the write transaction (when recall uses meaning),
    # once under lock to write it; never the content of the clean ones.
    assert 1 <= len(reads) <= 2
    assert all(drifted.pk.hex in read or str(drifted.pk) in read for read in reads)


def _bulk_store(user, n, *, content_size):
    """n clean memories with large content, written in bulk (migrate reads no index)."""
    from memories.recall.indexing import refresh_hashes

    rows = []
    for i in range(n):
        memory = Memory(
            owner=user,
            category="episodic",
            content=f"Memory {i}. " + "word " * (content_size // 5),
            gist=f"Memory {i}",
            created_at=NOW,
            updated_at=NOW,
            last_touched_at=NOW,
        )
        refresh_hashes(memory)
        rows.append(memory)
    Memory.objects.bulk_create(rows, batch_size=200)


def _peak_while(work):
    import tracemalloc

    tracemalloc.start()
    try:
        work()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("drift", [False, True], ids=["nothing to change", "one drifted memory"])
def test_migrate_memory_does_not_grow_with_the_content_of_the_store(
    make_memory, user, other_user, drift
):
    """Two stores of as many memories, one with 6 MB of content and one with almost none,
    cost migrate the same memory. (Compared with each other, not with a fixed figure: what
    300 model instances cost depends on the interpreter's state, not on the content.)"""
    _bulk_store(other_user, 300, content_size=10)
    _bulk_store(user, 300, content_size=20_000)  # 6 MB of content
    if drift:
        make_memory(category="event")
    content_bytes = 300 * 20_000

    small = _peak_while(lambda: migrate(owner=other_user, now=LATER))
    large = _peak_while(lambda: migrate(owner=user, now=LATER))

    assert large - small < content_bytes / 20, (
        f"peak {large:,} bytes with {content_bytes:,} of content, {small:,} with almost none"
    )
    assert Memory.objects.exclude(category="episodic").count() == 0


@pytest.mark.django_db(transaction=True)
def test_migrate_with_nothing_to_change_runs_while_another_connection_writes(make_memory, user):
    """It takes no lock: SQLite's write lock and PostgreSQL's row locks stay free."""
    import threading

    from django.db import transaction

    from tests.conftest import is_postgres

    held = make_memory()
    for n in range(3):
        make_memory(content=f"Memory {n}.")
    locked, release = threading.Event(), threading.Event()

    def hold_a_write() -> None:
        try:
            with transaction.atomic():  # on SQLite, BEGIN IMMEDIATE: the write lock
                list(Memory.objects.select_for_update().filter(pk=held.pk))
                Memory.objects.filter(pk=held.pk).update(provenance="being edited")
                locked.set()
                release.wait(timeout=60)
        finally:
            connection.close()

    holder = threading.Thread(target=hold_a_write)
    holder.start()
    # Fail after a second, not after the configured 30 s wait for a lock.
    limit, restore = (
        ("SET lock_timeout = '1s'", "RESET lock_timeout")
        if is_postgres()
        else ("PRAGMA busy_timeout = 1000", "PRAGMA busy_timeout = 30000")
    )
    try:
        assert locked.wait(timeout=30)
        with connection.cursor() as cursor:
            cursor.execute(limit)
        reply = migrate(owner=user, now=LATER)
    finally:
        release.set()
        holder.join(timeout=60)
        with connection.cursor() as cursor:
            cursor.execute(restore)

    assert (reply.migrated, reply.total) == (0, 4)
