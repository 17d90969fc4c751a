import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from memories.models import Closing, Memory, Snapshot
from tests.conftest import NOW
from tests.memories.exports import whole_document
from tests.store import unchanged

pytestmark = pytest.mark.django_db

FIXTURE = Path(__file__).parent.parent / "fixtures" / "original-taproot-backup.json"


def run(*args):
    out, err = StringIO(), StringIO()
    call_command(*args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_migrate_taproot_normalises_every_user(make_memory, user, other_user):
    make_memory(category="event")
    make_memory(owner=other_user, salience="3")

    out, _ = run("migrate_taproot")

    assert "Normalised 2 of 2 memories" in out
    assert "  alice: 1 of 1 normalised" in out
    assert "  bob: 1 of 1 normalised" in out
    assert "categories after: {'episodic': 2}" in out
    assert Snapshot.objects.count() == 2
    assert not Memory.objects.exclude(salience__in=["high", "medium"]).exists()


def test_migrate_taproot_for_one_user(make_memory, user, other_user):
    make_memory(category="event")
    theirs = make_memory(owner=other_user, category="event")

    out, _ = run("migrate_taproot", "--user", "alice")

    assert "Normalised 1 of 1" in out
    assert Memory.objects.get(pk=theirs.pk).category == "event"


def test_migrate_taproot_dry_run_changes_nothing(make_memory, user):
    memory = make_memory(category="event")

    out, _ = run("migrate_taproot", "--dry-run")

    assert "Dry run: 1 of 1" in out
    assert Memory.objects.get(pk=memory.pk).category == "event"
    assert not Snapshot.objects.exists()


def test_migrate_taproot_says_when_nothing_changed(make_memory, user):
    make_memory()

    out, _ = run("migrate_taproot")

    assert "already normalised: nothing changed" in out


def test_an_unknown_user_is_a_clear_error(user):
    for command in (
        ("migrate_taproot", "--user", "nobody"),
        ("export_taproot", "--user", "nobody"),
        ("import_taproot", str(FIXTURE), "--user", "nobody"),
    ):
        with unchanged(command), pytest.raises(CommandError, match="No account is named 'nobody'"):
            run(*command)


def test_import_taproot_reads_the_original_backup(user):
    out, _ = run("import_taproot", str(FIXTURE), "--user", "alice")

    assert "Imported 7 memories and 1 closing." in out
    assert "other keys ignored: 2" in out
    assert "restore_snapshot" in out
    assert Memory.objects.filter(owner=user).count() == 7


def test_import_taproot_refuses_an_unreadable_file(user, tmp_path):
    with unchanged(), pytest.raises(CommandError, match="Cannot read"):
        run("import_taproot", str(tmp_path / "missing.json"), "--user", "alice")


def test_import_taproot_refuses_a_bad_file_and_changes_nothing(user, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('[{"id": "nope", "content": "x"}]')

    with unchanged(), pytest.raises(CommandError, match="not a UUID"):
        run("import_taproot", str(bad), "--user", "alice")

    assert not Memory.objects.exists()
    assert not Snapshot.objects.exists()


def test_export_taproot_writes_to_stdout(user, make_memory):
    memory = make_memory()

    out, _ = run("export_taproot", "--user", "alice")

    export = json.loads(out)
    assert export["format"] == "taproot/1"
    assert [e["key"] for e in export["entries"]] == [f"mem:{memory.pk}"]


def test_export_taproot_writes_a_file_that_import_reads_back(
    user, other_user, make_memory, tmp_path
):
    make_memory(content="Ünïcode survives — ☕.")
    Closing.objects.create(owner=user, reflection="Bye.", created_at=NOW)
    target = tmp_path / "export.json"

    run("export_taproot", "--user", "alice", "--output", str(target))
    out, _ = run("import_taproot", str(target), "--user", "bob")

    assert "Imported 1 memory and 1 closing." in out
    assert Memory.objects.get(owner=other_user).content == "Ünïcode survives — ☕."


def test_export_taproot_refuses_an_unwritable_output(user, tmp_path):
    with pytest.raises(CommandError, match="Cannot write"):
        run("export_taproot", "--user", "alice", "--output", str(tmp_path / "no" / "x.json"))

    run("export_taproot", "--user", "alice")  # and it gave its turn back


def test_export_taproot_writes_byte_for_byte_the_whole_document(user, varied_store, tmp_path):
    target = tmp_path / "export.json"

    out, _ = run("export_taproot", "--user", "alice")
    run("export_taproot", "--user", "alice", "--output", str(target))

    for text in (out, target.read_text(encoding="utf-8")):
        whole = whole_document(user, json.loads(text)["exported_at"])
        assert text == json.dumps(whole, ensure_ascii=False, indent=1) + "\n"


def test_export_taproot_is_refused_while_an_export_of_the_account_runs(user, other_user):
    from memories.portability.exporting import EXPORT_BUSY, Export

    running = Export(owner=user)
    try:
        with pytest.raises(CommandError) as refused:
            run("export_taproot", "--user", "alice")
        run("export_taproot", "--user", "bob")
    finally:
        running.close()

    assert str(refused.value) == EXPORT_BUSY
    run("export_taproot", "--user", "alice")


def test_restore_snapshot_puts_records_back(user, make_memory):
    memory = make_memory(category="event")
    run("migrate_taproot")
    snapshot = Snapshot.objects.get()

    out, _ = run("restore_snapshot", str(snapshot.pk))

    assert f"Restored snapshot {snapshot.pk}" in out
    assert Memory.objects.get(pk=memory.pk).category == "event"
    assert Snapshot.objects.filter(reason="before-restore").count() == 1


@pytest.mark.parametrize("snapshot_id", ["12345", "abc"])
def test_restore_snapshot_refuses_an_unknown_id(user, snapshot_id):
    with unchanged(), pytest.raises(CommandError, match="snapshot"):
        run("restore_snapshot", snapshot_id)
