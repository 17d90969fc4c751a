"""restore_taproot: into an empty database everything comes back; a file that is damaged,
cut short or not ours is refused before anything changes."""

import io
import sqlite3
import subprocess
import tarfile
from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from oauth2_provider.models import get_access_token_model

from memories.models import Memory
from memories.portability.backups.archive import MANIFEST
from memories.portability.backups.state import MIGRATION_MADE_TRIGGERS_AND_VIEWS
from tests.backups.support import (
    database_of,
    manage,
    manifest_of,
    query,
    repacked,
    the_backup,
    whole_database,
)
from tests.conftest import is_postgres

pytestmark = pytest.mark.django_db(transaction=True)


def backup_into(folder):
    call_command("backup_taproot", "--output", str(folder), stdout=StringIO())
    return the_backup(folder)


def restore(*args):
    out = StringIO()
    call_command("restore_taproot", *args, stdout=out)
    return out.getvalue()


def test_everything_comes_back_in_an_empty_database(store, tmp_path, empty_database):
    made = backup_into(tmp_path / "backups")
    manifest = manifest_of(made)

    done = manage("restore_taproot", str(made), database_url=empty_database)

    assert done.returncode == 0, done.stderr
    assert "Restored a " in done.stdout and "2 accounts, 3 memories" in done.stdout
    for table, rows in manifest.tables.items():
        assert query(empty_database, f'SELECT count(*) FROM "{table}"') == [(rows,)], table
    memories = Memory.objects.order_by("pk")
    restored = query(
        empty_database,
        "SELECT id, owner_id, content, gist, archived_at IS NOT NULL FROM memories_memory "
        "ORDER BY id",
    )
    assert [(str(r[0]).replace("-", ""), *r[1:]) for r in restored] == [
        (m.pk.hex, m.owner_id, m.content, m.gist, m.archived_at is not None) for m in memories
    ]
    users = query(empty_database, "SELECT username, password FROM auth_user ORDER BY id")
    assert users == list(
        get_user_model().objects.order_by("pk").values_list("username", "password")
    )
    tokens = query(empty_database, "SELECT token_checksum FROM oauth2_provider_accesstoken")
    assert tokens == list(get_access_token_model().objects.values_list("token_checksum"))
    # The recall index came back with the memories: no live memory lacks its entry.
    unindexed = query(
        empty_database,
        "SELECT count(*) FROM memories_memory m LEFT JOIN memories_recallentry e "
        "ON e.memory_id = m.id WHERE m.archived_at IS NULL AND e.id IS NULL",
    )
    assert unindexed == [(0,)]


def test_a_database_that_holds_data_is_refused_without_force(store, tmp_path):
    made = backup_into(tmp_path / "backups")
    before = whole_database()

    with pytest.raises(CommandError) as refused:
        restore(str(made))

    message = str(refused.value)
    assert "is not empty: it holds 2 accounts, 3 memories" in message
    assert "--force" in message
    assert whole_database() == before
    assert len(list((tmp_path / "backups").iterdir())) == 1  # nothing backed up either


def test_force_backs_up_what_the_database_held_then_replaces_it(
    store, user, tmp_path, empty_database
):
    first = backup_into(tmp_path / "first")
    assert manage("restore_taproot", str(first), database_url=empty_database).returncode == 0
    Memory.objects.filter(owner=user).delete()
    second = backup_into(tmp_path / "second")
    kept = tmp_path / "kept"

    done = manage(
        "restore_taproot",
        str(second),
        "--force",
        "--output",
        str(kept),
        database_url=empty_database,
    )

    assert done.returncode == 0, done.stderr
    held = the_backup(kept)
    assert f"Backed up what the database held to {held}" in done.stdout
    assert manifest_of(held).reason == "before-restore"
    assert manifest_of(held).counts["memories"] == 3  # what the first restore wrote
    assert query(empty_database, "SELECT count(*) FROM memories_memory") == [(1,)]


def _truncated(made, folder):
    folder.mkdir()
    cut = folder / "cut.tar"
    cut.write_bytes(made.read_bytes()[: made.stat().st_size // 2])
    return cut


def _flipped(made, folder):
    folder.mkdir()
    data = bytearray(made.read_bytes())
    data[2048] ^= 0xFF  # inside the database, past the tar header
    flipped = folder / "flipped.tar"
    flipped.write_bytes(bytes(data))
    return flipped


def _not_a_backup(made, folder):
    folder.mkdir()
    text = folder / "notes.tar"
    text.write_text("Shopping list: compost, twine.\n" * 100)
    return text


def _without_manifest(made, folder):
    folder.mkdir()
    bare = folder / "bare.tar"
    database = database_of(made, folder)
    with tarfile.open(bare, "w") as tar:
        tar.add(database, arcname=database.name)
    return bare


def _garbled_manifest(made, folder):
    folder.mkdir()
    garbled = folder / "garbled.tar"
    database = database_of(made, folder)
    with tarfile.open(garbled, "w") as tar:
        tar.add(database, arcname=database.name)
        info = tarfile.TarInfo(MANIFEST)
        info.size = 9
        tar.addfile(info, io.BytesIO(b"{not json"))
    return garbled


def _damaged_database_with_a_matching_checksum(made, folder):
    folder.mkdir()
    database = database_of(made, folder)
    data = bytearray(database.read_bytes())
    start, end = (
        _a_page_in_use(database) if not is_postgres() else (len(data) // 3, len(data) // 3 + 4096)
    )
    for at in range(start, end):
        data[at] ^= 0x5A
    database.write_bytes(bytes(data))
    return repacked(made, folder / "repacked", database=database)


def _a_page_in_use(database):
    """The bytes of the memories table's root page. SQLite's online backup copies free pages
    too, and integrity_check cannot see damage to a page nothing uses, so a guessed offset
    (earlier tests leave free pages behind) could damage nothing that matters."""
    with sqlite3.connect(database) as copy:
        page_size = copy.execute("PRAGMA page_size").fetchone()[0]
        (root,) = copy.execute(
            "SELECT rootpage FROM sqlite_master WHERE name = 'memories_memory'"
        ).fetchone()
    copy.close()
    return (root - 1) * page_size, root * page_size


def _of_the_other_kind(made, folder):
    return repacked(made, folder, kind="sqlite" if is_postgres() else "postgresql")


def _from_a_newer_taproot(made, folder):
    migrations = manifest_of(made).migrations
    newer = {**migrations, "memories": [*migrations["memories"], "0999_from_the_future"]}
    return repacked(made, folder, migrations=newer)


def _missing(made, folder):
    return folder / "no-such-backup.tar"


REFUSED = {
    "cut short": (_truncated, "is damaged"),
    "a byte changed": (_flipped, "does not match the checksum in its manifest"),
    "not a backup": (_not_a_backup, "is not a Taproot backup"),
    "no manifest": (_without_manifest, "it has no manifest"),
    "a manifest that is not JSON": (_garbled_manifest, "manifest cannot be read: it is not JSON"),
    "a damaged database": (
        _damaged_database_with_a_matching_checksum,
        "pg_restore cannot read it" if is_postgres() else "fails SQLite's integrity check",
    ),
    "another kind of database": (_of_the_other_kind, "Restore it into a"),
    "a newer Taproot": (_from_a_newer_taproot, "memories.0999_from_the_future"),
    "no such file": (_missing, "There is no backup file at"),
}


def live_triggers_and_views():
    """What the migrations made in the test database, read as each database lists it."""
    with connection.cursor() as cursor:
        if is_postgres():
            cursor.execute(
                "SELECT 'trigger ' || t.tgname || ' on ' || c.relname FROM pg_trigger t "
                "JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace n "
                "ON n.oid = c.relnamespace WHERE NOT t.tgisinternal AND n.nspname = "
                "current_schema() UNION SELECT 'view ' || viewname FROM pg_views "
                "WHERE schemaname = current_schema()"
            )
        else:
            cursor.execute(
                "SELECT CASE type WHEN 'trigger' THEN 'trigger ' || name || ' on ' || tbl_name "
                "ELSE 'view ' || name END FROM sqlite_master WHERE type IN ('trigger', 'view')"
            )
        return {row[0] for row in cursor.fetchall()}


def test_the_triggers_and_views_a_restore_allows_are_those_the_migrations_make():
    assert live_triggers_and_views() == MIGRATION_MADE_TRIGGERS_AND_VIEWS[connection.vendor]


def test_a_backup_holding_a_trigger_and_a_view_is_refused_naming_them(store, tmp_path):
    with connection.cursor() as cursor:
        if is_postgres():
            cursor.execute(
                "CREATE FUNCTION sneaky() RETURNS trigger LANGUAGE plpgsql AS "
                "$$ BEGIN NEW.content := 'rewritten'; RETURN NEW; END $$"
            )
            cursor.execute(
                "CREATE TRIGGER sneaky BEFORE INSERT ON memories_memory "
                "FOR EACH ROW EXECUTE FUNCTION sneaky()"
            )
        else:
            cursor.execute(
                "CREATE TRIGGER sneaky AFTER INSERT ON memories_memory "
                "BEGIN UPDATE memories_memory SET content = 'rewritten' WHERE rowid = NEW.rowid; "
                "END"
            )
        cursor.execute("CREATE VIEW peek AS SELECT content FROM memories_memory")
    made = backup_into(tmp_path / "backups")  # its manifest made to match, as a forger's
    with connection.cursor() as cursor:
        cursor.execute("DROP VIEW peek")
        cursor.execute("DROP TRIGGER sneaky" + (" ON memories_memory" if is_postgres() else ""))
        if is_postgres():
            cursor.execute("DROP FUNCTION sneaky()")
    before = whole_database()

    with pytest.raises(CommandError) as refused:
        restore(str(made), "--force", "--output", str(tmp_path / "kept"))

    message = str(refused.value)
    assert "trigger sneaky on memories_memory" in message and "view peek" in message
    assert "Taproot's migrations do not make" in message
    assert whole_database() == before
    assert not (tmp_path / "kept").exists()
    assert live_triggers_and_views() == MIGRATION_MADE_TRIGGERS_AND_VIEWS[connection.vendor]


def test_a_count_trigger_rewritten_under_its_own_name_is_refused(store, tmp_path):
    if is_postgres():
        pytest.skip("SQLite keeps a trigger's text; pg_restore's list names it only")
    from memories.models.counts_sql import SQLITE_CREATE

    with connection.cursor() as cursor:
        cursor.execute("DROP TRIGGER storecount_insert")
        cursor.execute(
            "CREATE TRIGGER storecount_insert AFTER INSERT ON memories_memory "
            "BEGIN UPDATE memories_memory SET content = 'rewritten' WHERE rowid = NEW.rowid; "
            "END"
        )
    made = backup_into(tmp_path / "backups")
    with connection.cursor() as cursor:
        cursor.execute("DROP TRIGGER storecount_insert")
        cursor.execute(SQLITE_CREATE[0])
    before = whole_database()

    with pytest.raises(CommandError) as refused:
        restore(str(made), "--force", "--output", str(tmp_path / "kept"))

    assert "trigger storecount_insert on memories_memory, altered" in str(refused.value)
    assert whole_database() == before


def test_an_export_given_to_restore_points_to_import_taproot(store, user, tmp_path):
    export = tmp_path / "alice.json"
    call_command("export_taproot", "--user", user.username, "--output", str(export))
    before = whole_database()

    with pytest.raises(CommandError) as refused:
        restore(str(export), "--force", "--output", str(tmp_path / "kept"))

    assert "looks like an export" in str(refused.value)
    assert f"import_taproot {export} --user NAME" in str(refused.value)
    assert whole_database() == before
    assert not (tmp_path / "kept").exists()


def test_a_bad_backup_is_refused_with_a_clear_message_and_changes_nothing(store, tmp_path):
    """Each kind of bad file, tried with --force on a database that holds data: refused
    before --force backs anything up, and nothing in the database changes."""
    made = backup_into(tmp_path / "backups")
    before = whole_database()

    for case, (make_bad, says) in REFUSED.items():
        bad = make_bad(made, tmp_path / case.replace(" ", "-"))
        with pytest.raises(CommandError) as refused:
            restore(str(bad), "--force", "--output", str(tmp_path / "kept"))

        assert says in str(refused.value), case
        assert whole_database() == before, case
        assert not (tmp_path / "kept").exists(), case


def test_a_dump_that_fails_midway_leaves_the_database_as_it_was(store, tmp_path):
    """The checks pass (the checksum matches, pg_restore lists the dump) but writing it
    fails part way: the one transaction is rolled back."""
    if not is_postgres():
        pytest.skip("SQLite's copy is checked whole (integrity_check) before it is written")
    made = backup_into(tmp_path / "backups")
    database = _damaged_after_its_contents(database_of(made, tmp_path))
    damaged = repacked(made, tmp_path / "damaged", database=database)
    before = whole_database()

    with pytest.raises(CommandError, match=r"nothing was restored|left as it was"):
        restore(str(damaged), "--force", "--output", str(tmp_path / "kept"))

    assert whole_database() == before
    assert the_backup(tmp_path / "kept")  # --force had backed it up first


def _damaged_after_its_contents(dump):
    """The dump with some table's rows damaged and its table of contents whole: where that
    falls depends on the dump, so the first place (past the middle) that pg_restore still
    lists but cannot restore."""
    whole = dump.read_bytes()
    for hundredth in range(50, 100):
        data = bytearray(whole)
        start = len(data) * hundredth // 100
        for at in range(start, start + 16):
            data[at] ^= 0x5A
        dump.write_bytes(bytes(data))
        listed = subprocess.run(["pg_restore", "--list", str(dump)], capture_output=True)
        read = subprocess.run(["pg_restore", "--file=/dev/null", str(dump)], capture_output=True)
        if listed.returncode == 0 and read.returncode != 0:
            return dump
    raise AssertionError("no place in the dump damages its rows alone")


def test_a_backup_whose_rows_differ_from_its_manifest_is_refused_and_changes_nothing(
    store, tmp_path
):
    """SQLite counts the copy's rows before writing it; PostgreSQL counts them in the
    restore's own transaction, and rolls it back."""
    made = backup_into(tmp_path / "backups")
    tables = manifest_of(made).tables
    wrong = repacked(
        made,
        tmp_path / "wrong",
        tables={**tables, "memories_memory": tables["memories_memory"] + 1},
    )
    before = whole_database()

    with pytest.raises(CommandError) as refused:
        restore(str(wrong), "--force", "--output", str(tmp_path / "kept"))

    message = str(refused.value)
    if is_postgres():
        assert "left as it was" in message
        assert "the table memories_memory does not hold the 4 rows the backup lists" in message
    else:
        assert "does not hold the rows its manifest lists" in message
    assert whole_database() == before


def test_an_index_built_for_another_ranking_profile_is_rebuilt_with_a_message(
    user, make_memory, seed_profile, tmp_path, empty_database
):
    make_memory(gist="Running in the gardens", content="What a morning")
    made = backup_into(tmp_path / "backups")
    assert manifest_of(made).ranking == "seed"

    done = manage("restore_taproot", str(made), database_url=empty_database)

    assert done.returncode == 0, done.stderr
    assert (
        "Rebuilding the recall index: the backup's recall index was built for the 'seed' "
        "ranking profile, and TAPROOT_RANKING is 'taproot' here." in done.stdout
    )
    assert query(empty_database, "SELECT profile FROM memories_recallindex") == [("taproot",)]


def test_memories_without_vectors_get_them_when_the_embedder_is_on(
    user, make_memory, lexical_only, tmp_path, empty_database
):
    make_memory(gist="Cello practice", content="Morning scales before work")
    made = backup_into(tmp_path / "backups")
    assert manifest_of(made).embedder == "none"

    done = manage("restore_taproot", str(made), database_url=empty_database)

    assert done.returncode == 0, done.stderr
    assert "embedded with TAPROOT_EMBEDDER='none', and it is 'wordllama' here" in done.stdout
    assert query(empty_database, "SELECT embedder FROM memories_memoryvector") == [
        ("wordllama-l2_supercat-256",)
    ]


def test_an_index_that_fits_is_not_rebuilt(store, tmp_path, empty_database):
    done = manage("restore_taproot", str(backup_into(tmp_path)), database_url=empty_database)

    assert done.returncode == 0, done.stderr
    assert "Rebuilding the recall index" not in done.stdout
