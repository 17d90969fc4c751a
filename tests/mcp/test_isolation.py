"""A token acts for exactly one user: Alice's token never reads, ranks, counts or changes
Bob's memories, through any of the eight tools."""

import json
from typing import Any

import pytest
from django.utils import timezone

from memories.models import Closing, Memory, Revision, Snapshot
from tests.store import unchanged

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.server]

BOB_WORD = "zanzibarquokka"


def bobs_rows(bob: Any) -> dict[str, Any]:
    return {
        "memories": list(Memory.objects.filter(owner=bob).order_by("pk").values()),
        "closings": list(Closing.objects.filter(owner=bob).order_by("pk").values()),
        "revisions": Revision.objects.filter(owner=bob).count(),
        "snapshots": Snapshot.objects.filter(owner=bob).count(),
    }


@pytest.fixture
def bob_store(make_memory: Any, other_user: Any) -> dict[str, str]:
    now = timezone.now()
    fields = {"owner": other_user, "created_at": now, "updated_at": now}
    core = make_memory(
        **fields, core=True, category="identity", content=f"Bob core {BOB_WORD}", gist="Bob core"
    )
    catalog = make_memory(**fields, content=f"Bob trip {BOB_WORD}", gist=f"Bob {BOB_WORD} trip")
    drifted = make_memory(**fields, category="event", salience="3", content=f"Bob {BOB_WORD}")
    archived = make_memory(**fields, archived_at=now, content=f"Bob old {BOB_WORD}")
    Closing.objects.create(owner=other_user, reflection=f"Bob bye {BOB_WORD}", created_at=now)
    return {
        "core": str(core.pk),
        "catalog": str(catalog.pk),
        "drifted": str(drifted.pk),
        "archived": str(archived.pk),
    }


def test_alices_token_never_touches_bobs_memories(eras, bob_store, user, other_user, make_memory):
    bob = other_user
    bob_ids = list(bob_store.values())
    mine = make_memory(content="Alice likes kites.", gist="Alice kites")
    before = bobs_rows(bob)
    for mcp in eras:
        # Reading and counting.
        payload = mcp.call("taproot_reflect").content[0].text
        assert BOB_WORD not in payload
        assert not any(bob_id in payload for bob_id in bob_ids)
        status = mcp.reply("taproot_status")
        assert status["live_memories"] == Memory.objects.filter(owner=user).live().count()
        assert status["archived"] == 0
        assert status["closings"] == Closing.objects.filter(owner=user).count()
        # Ranking and strengthening.
        assert mcp.reply("taproot_recall", {"query": BOB_WORD})["count"] == 0
        assert mcp.reply("taproot_recall", {"ids": bob_ids})["count"] == 0
        recalled = mcp.reply("taproot_recall", {"category": "identity", "limit": 50})
        assert all(r["id"] not in bob_ids for r in recalled["results"])
        # Changing.
        with unchanged(mcp.mode):
            for memory_id in bob_ids:
                mcp.refusal("taproot_promote", {"memory_id": memory_id, "core": False})
                mcp.refusal(
                    "taproot_remember",
                    {"update_id": memory_id, "category": "episodic", "content": "Overwritten."},
                )
                for action in ("archive", "unarchive", "delete"):
                    mcp.refusal("taproot_forget", {"action": action, "memory_id": memory_id})
            mcp.refusal(
                "taproot_forget",
                {
                    "action": "compress",
                    "ids": [str(mine.pk), bob_store["catalog"]],
                    "content": "Merged.",
                    "gist": "Merged",
                },
            )
        linked = mcp.reply(
            "taproot_remember",
            {
                "category": "episodic",
                "content": f"Link attempt by {mcp.mode}.",
                "gist": f"Link attempt {mcp.mode}",
                "linked_memories": bob_ids,
            },
        )
        assert Memory.objects.get(pk=linked["memory_id"]).linked_memories == []
        migrated = mcp.reply("taproot_migrate")
        assert migrated["total"] == Memory.objects.filter(owner=user).count()
        assert "event" not in json.dumps(migrated)
        mcp.reply("taproot_close", {"reflection": f"Alice signs off ({mcp.mode})."})
    assert bobs_rows(bob) == before


def test_bobs_token_sees_only_bobs_store(connect, token_for, bob_store, other_user, make_memory):
    make_memory(content="Alice's secret garden plan.", gist="Alice garden plan")
    bob = connect(token_for(other_user), mode="auto")
    status = bob.reply("taproot_status")
    assert status["live_memories"] == 3
    assert status["archived"] == 1
    assert bob.reply("taproot_recall", {"query": "garden"})["count"] == 0
    assert bob.reply("taproot_recall", {"query": BOB_WORD, "limit": 50})["count"] == 3
