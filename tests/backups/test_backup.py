"""backup_taproot: the whole database in one checked file, named with the time."""

import os
import re
import stat
import subprocess
import time
from dataclasses import replace
from datetime import UTC, datetime
from functools import partial
from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.db.migrations.recorder import MigrationRecorder

from memories.models import Closing, Memory, Revision, Snapshot
from memories.portability.backups import Manifest, Progress, backups_in, prune
from memories.portability.backups.archive import write_archive
from tests.backups.support import database_of, manifest_of, the_backup
from tests.conftest import is_postgres


def backup(*args):
    out = StringIO()
    call_command("backup_taproot", *args, stdout=out)
    return out.getvalue()


@pytest.mark.django_db(transaction=True)
def test_a_backup_holds_the_whole_database_and_says_what_it_holds(store, tmp_path):
    said = backup("--output", str(tmp_path))

    made = the_backup(tmp_path)
    assert re.fullmatch(r"taproot-\d{8}T\d{6}Z\.tar", made.name)
    assert stat.S_IMODE(made.stat().st_mode) == 0o600  # every account's data is in it
    assert str(made) in said and "2 accounts, 3 memories" in said
    manifest = manifest_of(made)
    assert manifest.kind == ("postgresql" if is_postgres() else "sqlite")
    assert manifest.counts == {
        "accounts": 2,
        "memories": 3,
        "revisions": Revision.objects.count(),
        "snapshots": 1,
        "closings": 1,
    }
    for model in (get_user_model(), Memory, Revision, Snapshot, Closing):
        assert manifest.tables[model._meta.db_table] == model.objects.count()
    assert manifest.tables["oauth2_provider_accesstoken"] == 1
    assert manifest.tables["oauth2_provider_refreshtoken"] == 1
    applied = MigrationRecorder(connection).applied_migrations()
    assert {(app, name) for app, names in manifest.migrations.items() for name in names} == set(
        applied
    )
    assert (manifest.ranking, manifest.embedder) == ("taproot", "wordllama")


@pytest.mark.django_db(transaction=True)
def test_the_database_in_a_backup_is_one_its_own_tools_read(store, tmp_path):
    backup("--output", str(tmp_path))
    database = database_of(the_backup(tmp_path), tmp_path)

    if is_postgres():
        listed = subprocess.run(
            ["pg_restore", "--list", str(database)], capture_output=True, text=True, check=True
        )
        assert "TABLE DATA public memories_memory" in listed.stdout
    else:
        import sqlite3

        copy = sqlite3.connect(database)
        assert copy.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        # A file that stands alone: no -wal file beside it is needed.
        assert copy.execute("PRAGMA journal_mode").fetchone() == ("delete",)
        contents = {row[0] for row in copy.execute("SELECT content FROM memories_memory")}
        assert "Speaks plainly; <b>prefers</b> short answers ☕" in contents


def test_backups_of_the_same_second_are_numbered_and_kept_in_order(tmp_path):
    database = tmp_path / "database.sqlite3"
    database.write_bytes(b"a database")
    folder = tmp_path / "backups"
    folder.mkdir()
    moment = datetime(2026, 12, 2, 3, 30, tzinfo=UTC)
    manifest = partial(replace, _a_manifest(), created_at=moment)

    made = [
        write_archive(
            folder,
            database,
            lambda size, sha256: manifest(size=size, sha256=sha256),
            taken_at=moment,
            progress=Progress.quiet(),
        )[0]
        for _ in range(3)
    ]

    assert [path.name for path in made] == [
        "taproot-20261202T033000Z.tar",
        "taproot-20261202T033000Z-2.tar",
        "taproot-20261202T033000Z-3.tar",
    ]
    assert [b.path for b in backups_in(folder)] == made
    pruned = prune(folder, keep=1, now=datetime(2026, 12, 3, tzinfo=UTC))
    assert pruned.removed == made[:2]


def _a_manifest():
    return Manifest(
        created_at=datetime(2026, 1, 1, tzinfo=UTC),
        reason="requested",
        taproot_version="0.1.0",
        taproot_commit=None,
        kind="sqlite",
        server_version="3.40.1",
        file="database.sqlite3",
        size=0,
        sha256="0" * 64,
        migrations={},
        ranking="taproot",
        embedder="none",
        counts={},
        tables={},
    )


@pytest.mark.django_db(transaction=True)
def test_keep_deletes_all_but_the_newest_backups_and_nothing_else(store, tmp_path):
    older = [tmp_path / f"taproot-2026010{day}T030000Z.tar" for day in (1, 2, 3)]
    for path in older:
        path.write_bytes(b"an older backup")
    others = [tmp_path / "notes.txt", tmp_path / "taproot-latest.tar", tmp_path / "x.tar"]
    for path in others:
        path.write_text("not a backup of ours")

    said = backup("--output", str(tmp_path), "--keep", "2")

    kept = sorted(path.name for path in tmp_path.glob("taproot-2*.tar"))
    assert len(kept) == 2
    assert kept[0] == older[2].name  # the newest of the older ones, then today's
    assert not older[0].exists() and not older[1].exists()
    assert all(path.exists() for path in others)
    assert "Deleted 2 older backup(s), keeping the newest 2" in said


@pytest.mark.django_db(transaction=True)
def test_keep_must_keep_at_least_one_and_writes_nothing_when_refused(store, tmp_path):
    with pytest.raises(CommandError, match="--keep must be at least 1"):
        backup("--output", str(tmp_path), "--keep", "0")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.django_db(transaction=True)
def test_an_output_that_is_a_file_is_refused(store, tmp_path):
    taken = tmp_path / "taken"
    taken.write_text("a file")
    with pytest.raises(CommandError, match="is a file: --output names the folder"):
        backup("--output", str(taken))


@pytest.mark.django_db(transaction=True)
def test_a_missing_pg_dump_is_named_with_how_to_install_it(store, tmp_path, monkeypatch):
    if not is_postgres():
        pytest.skip("pg_dump backs up PostgreSQL only")
    monkeypatch.setenv("PATH", str(tmp_path / "nothing-here"))
    folder = tmp_path / "backups"

    with pytest.raises(CommandError) as refused:
        backup("--output", str(folder))

    message = str(refused.value)
    assert "pg_dump was not found on PATH" in message
    major = connection.pg_version // 10000
    assert f"postgresql-client-{major}" in message
    assert list(folder.iterdir()) == []  # no half-made file


@pytest.mark.django_db(transaction=True)
def test_keep_never_deletes_the_new_backup_when_others_are_stamped_in_the_future(store, tmp_path):
    future = [tmp_path / f"taproot-2099010{day}T030000Z.tar" for day in (1, 2)]
    for path in future:
        path.write_bytes(b"a backup from a clock that ran ahead")
    errors = StringIO()

    said = StringIO()
    call_command(
        "backup_taproot", "--output", str(tmp_path), "--keep", "2", stdout=said, stderr=errors
    )

    made = [b.path for b in backups_in(tmp_path) if not b.stamp.startswith("2099")]
    assert len(made) == 1 and made[0].exists()
    assert manifest_of(made[0]).counts["memories"] == 3
    assert all(path.exists() for path in future)  # suspect, so not deleted either
    assert "later than now" in errors.getvalue()
    assert future[0].name in errors.getvalue()
    assert "Deleted" not in said.getvalue()


@pytest.mark.django_db(transaction=True)
def test_keep_counts_only_regular_files_and_never_follows_a_link(store, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    target = elsewhere / "precious.tar"
    target.write_bytes(b"not ours to delete")
    folder = tmp_path / "backups"
    folder.mkdir()
    (folder / "taproot-20260101T030000Z.tar").symlink_to(target)
    (folder / "taproot-20260102T030000Z.tar").mkdir()
    old = folder / "taproot-20260103T030000Z.tar"
    old.write_bytes(b"an older backup")

    backup("--output", str(folder), "--keep", "1")

    assert target.exists() and (folder / "taproot-20260101T030000Z.tar").is_symlink()
    assert (folder / "taproot-20260102T030000Z.tar").is_dir()
    assert not old.exists()
    assert len(backups_in(folder)) == 1


@pytest.mark.django_db(transaction=True)
def test_a_backup_removes_work_folders_left_by_a_killed_one_a_day_later(store, tmp_path):
    aged = tmp_path / ".taproot-abc123"
    aged.mkdir()
    (aged / "database.sqlite3").write_bytes(b"a whole copy of the database")
    aged_partial = tmp_path / ".taproot-def456.partial"
    aged_partial.write_bytes(b"half a backup")
    two_days_ago = time.time() - 2 * 86400
    for path in (aged / "database.sqlite3", aged, aged_partial):
        os.utime(path, (two_days_ago, two_days_ago))
    fresh = tmp_path / ".taproot-running"
    fresh.mkdir()
    (fresh / "database.sqlite3").write_bytes(b"a backup running now")

    backup("--output", str(tmp_path))

    assert not aged.exists() and not aged_partial.exists()
    assert (fresh / "database.sqlite3").exists()
    assert len(backups_in(tmp_path)) == 1
