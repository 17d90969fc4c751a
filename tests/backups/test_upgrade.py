"""Upgrading: a database built at the first released schema, with data written through
the models of that time, migrates forward with every record intact, and works.

The first release is each of Taproot's own apps at its first migration (memories 0001,
taproot_oauth 0001); Django's and django-oauth-toolkit's apps stay where that release
left them, at the same pinned versions as now (`makemigrations --check` guards the rest).
"""

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from io import StringIO
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from oauth2_provider.models import get_access_token_model, get_application_model

from memories.models import Closing, Memory, RecallIndex, Revision, Snapshot
from memories.models.choices import Category
from memories.recall.indexing import normalised_hash
from memories.services import RecallFilters, recall
from tests.backups.support import manage, query, the_backup

# Each test's own writes are undone when it ends; what the module's fixture wrote stays
# until the module is done.
pytestmark = pytest.mark.django_db

FIRST_RELEASE = [("memories", "0001_initial"), ("taproot_oauth", "0001_initial")]
THEN = datetime(2026, 11, 29, 21, 0, tzinfo=UTC)


def migrate_to(targets: list[tuple[str, str]]) -> Any:
    """Migrate to `targets`; the models of every app as the database now stands."""
    MigrationExecutor(connection).migrate(targets)
    loader = MigrationExecutor(connection).loader
    return loader.project_state(list(loader.applied_migrations)).apps


def latest() -> list[tuple[str, str]]:
    return MigrationExecutor(connection).loader.graph.leaf_nodes()


@pytest.fixture(scope="module")
def first_release(
    django_db_setup: None, django_db_blocker: Any, tmp_path_factory: Any
) -> Iterator[tuple[dict[str, list[dict[str, Any]]], Any]]:
    """The test database taken back to the first released schema, given what that release
    wrote and backed up by this Taproot, then migrated forward to the latest: the records
    as written (model label → rows) and the folder holding the backup.

    Built once for the module, outside the tests' transactions (a schema change cannot
    happen inside one on SQLite): taking the database back through every migration since
    the first release is most of the module's time. Emptied at the end."""
    try:
        with django_db_blocker.unblock():
            apps = migrate_to(FIRST_RELEASE)
            try:
                written = _write_first_release_data(apps)
                backups = tmp_path_factory.mktemp("first-release")
                call_command("backup_taproot", "--output", str(backups), stdout=StringIO())
            finally:
                migrate_to(latest())
        yield written, backups
    finally:
        with django_db_blocker.unblock():
            call_command("flush", interactive=False, verbosity=0)


def _write_first_release_data(apps: Any) -> dict[str, list[dict[str, Any]]]:
    User = apps.get_model("auth", "User")
    Memory = apps.get_model("memories", "Memory")
    alice = User.objects.create(username="alice", password="pbkdf2_sha256$1$salt$hash")
    bob = User.objects.create(username="bob", password="pbkdf2_sha256$1$salt$other")

    def memory(owner: Any, **values: Any) -> Any:
        content, gist = values["content"], values["gist"]
        return Memory.objects.create(
            id=uuid.uuid4(),
            owner=owner,
            created_at=THEN,
            updated_at=values.pop("updated_at", THEN),
            last_touched_at=THEN,
            gist_hash=normalised_hash(gist),
            content_hash=normalised_hash(content),
            **values,
        )

    memories = [
        memory(
            alice,
            category="identity",
            content="Speaks plainly; <script>prefers</script> short answers ☕",
            gist="Prefers short answers",
            salience="high",
            core=True,
            tags=["style", "Ünïcode"],
            search_keywords=["brevity"],
            epistemic_status="observed",
            provenance="line one\nline two",
        ),
        memory(
            alice,
            category="active_thread",
            content="Chapter three (soil) is half drafted; next the compost section.",
            gist="Chapter three half drafted",
            conversation_url="https://claude.ai/chat/1",
            retrieval_count=4,
            last_retrieved=THEN + timedelta(hours=1),
            updated_at=THEN + timedelta(minutes=5),
        ),
        memory(
            alice,
            category="episodic",
            content="Sold the old bicycle.",
            gist="Sold the bicycle",
            salience="low",
            archived_at=THEN,
            archive_reason="old news",
        ),
        memory(bob, category="relationship", content="Calls on Sundays.", gist="Sunday calls"),
    ]
    apps.get_model("memories", "MemoryTag").objects.create(
        memory=memories[0], owner=alice, key="style"
    )
    apps.get_model("memories", "MemoryToken").objects.create(
        memory=memories[0], owner=alice, key="short", in_keywords=True
    )
    apps.get_model("memories", "Revision").objects.create(
        memory=memories[1],
        owner=alice,
        source="tool",
        action="promote",
        created_at=THEN,
        changed_fields=["salience"],
        before={"salience": "low"},
        after={"salience": "medium"},
    )
    apps.get_model("memories", "Closing").objects.create(
        id=uuid.uuid4(), owner=alice, reflection="We planned chapter three.", created_at=THEN
    )
    apps.get_model("memories", "Snapshot").objects.create(
        owner=alice, created_at=THEN, reason="before-import", memory_count=0, records={"x": [1]}
    )
    client = apps.get_model("oauth2_provider", "Application").objects.create(
        client_id="first-release-client",
        client_secret="stored-hashed",
        client_type="confidential",
        authorization_grant_type="authorization-code",
        name="Claude",
        redirect_uris="https://claude.ai/api/mcp/auth_callback",
        user=alice,
    )
    apps.get_model("oauth2_provider", "AccessToken").objects.create(
        user=alice,
        application=client,
        token="",
        token_checksum="a" * 64,
        expires=THEN + timedelta(days=365 * 50),
        scope="mcp",
        resource=["http://127.0.0.1:8000/mcp"],
    )
    return _as_written(apps)


RECORDS = [
    ("auth", "User"),
    ("memories", "Memory"),
    ("memories", "Revision"),
    ("memories", "Closing"),
    ("memories", "Snapshot"),
    ("oauth2_provider", "Application"),
    ("oauth2_provider", "AccessToken"),
]


def _as_written(apps: Any) -> dict[str, list[dict[str, Any]]]:
    return {
        f"{app}.{name}": list(apps.get_model(app, name).objects.order_by("pk").values())
        for app, name in RECORDS
    }


def _now_held(written: dict[str, list[dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    """What the current models read of the same records, in the columns written then."""
    models = {
        "auth.User": get_user_model(),
        "memories.Memory": Memory,
        "memories.Revision": Revision,
        "memories.Closing": Closing,
        "memories.Snapshot": Snapshot,
        "oauth2_provider.Application": get_application_model(),
        "oauth2_provider.AccessToken": get_access_token_model(),
    }
    return {
        label: list(models[label].objects.order_by("pk").values(*(rows[0].keys() if rows else ())))
        for label, rows in written.items()
    }


def test_a_first_release_database_migrates_forward_with_every_record_intact(first_release):
    written, _ = first_release

    assert _now_held(written) == written
    alice = get_user_model().objects.get(username="alice")
    kept = Memory.objects.get(gist="Prefers short answers")
    assert kept.id_prefix == str(kept.pk)[:8]
    # The store works: the upgrade built the recall index for the default profile, and
    # recall finds memories by word (the archived one stays out).
    assert RecallIndex.objects.get(owner=alice).profile == "taproot"
    found = recall(owner=alice, filters=RecallFilters(query="short answers"))
    assert [hit.memory.pk for hit in found.hits][:1] == [kept.pk]
    by_category = recall(owner=alice, filters=RecallFilters(category=Category.EPISODIC))
    assert by_category.hits == []


def test_a_backup_of_the_first_release_restores_into_this_taproot(first_release, empty_database):
    records, backups = first_release

    done = manage("restore_taproot", str(the_backup(backups)), database_url=empty_database)

    assert done.returncode == 0, done.stderr
    assert "applied 0 migration(s)" not in done.stdout
    written = records["memories.Memory"]
    restored = query(
        empty_database, "SELECT id, content, gist, salience, retrieval_count FROM memories_memory"
    )
    assert sorted((str(r[0]).replace("-", ""), *r[1:]) for r in restored) == sorted(
        (m["id"].hex, m["content"], m["gist"], m["salience"], m["retrieval_count"]) for m in written
    )
    applied = query(empty_database, "SELECT app, name FROM django_migrations")
    assert set(latest()) <= set(applied)
    profiles = query(empty_database, "SELECT DISTINCT profile FROM memories_recallindex")
    assert profiles == [("taproot",)]
