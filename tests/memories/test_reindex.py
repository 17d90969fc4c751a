"""The recall index records the profile that built it: a server refuses to start on an
index of the other profile (SPEC §3.1), `migrate` still runs, and `reindex_taproot`
rebuilds it, batch by batch, the same way every time."""

from io import StringIO
from typing import Any

import anyio
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from mcp_bridge.handlers import archive, recall, remember
from memories.models import Memory, MemoryTag, MemoryToken, MemoryVector, RecallEntry, RecallIndex
from memories.recall.indexing import index_mismatch
from taproot_site.asgi import build_application
from tests.conftest import NOW
from tests.store import unchanged

# Start-up reads the database from a thread of its own: the rows must be committed.
pytestmark = pytest.mark.django_db(transaction=True)


def index_state(owner) -> dict[str, Any]:
    return {
        "tokens": set(
            MemoryToken.objects.filter(owner=owner).values_list(
                "entry__memory_id", "key", "in_keywords"
            )
        ),
        "tags": set(MemoryTag.objects.filter(owner=owner).values_list("memory_id", "key")),
        "entries": set(
            RecallEntry.objects.filter(owner=owner).values_list(
                "memory_id", "salience", "retrieval_count", "created_us", "updated_us"
            )
        ),
        "index": RecallIndex.objects.filter(owner=owner).values_list("profile", "live_memories")[0],
    }


@pytest.fixture
def seed_built_store(user, make_memory, settings):
    """A store indexed under the seed profile, served under the taproot one."""
    settings.TAPROOT_RANKING = "seed"
    running = make_memory(gist="Running in the gardens", content="What a morning", tags=["Home"])
    make_memory(gist="Cello practice", content="Scales before work")
    gone = make_memory(gist="Old bicycle", content="Sold it")
    archive(owner=user, memory_id=gone.pk, now=NOW)
    settings.TAPROOT_RANKING = "taproot"
    return running


def start_up(app) -> dict[str, Any]:
    """Send lifespan.startup as uvicorn does; the app's answer (and shut it down if up)."""

    async def run() -> dict[str, Any]:
        to_app, app_receives = anyio.create_memory_object_stream[dict[str, Any]](2)
        app_sends, from_app = anyio.create_memory_object_stream[dict[str, Any]](2)
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(app, {"type": "lifespan"}, app_receives.receive, app_sends.send)
            await to_app.send({"type": "lifespan.startup"})
            answer = await from_app.receive()
            if answer["type"] == "lifespan.startup.complete":
                await to_app.send({"type": "lifespan.shutdown"})
                await from_app.receive()
        return answer

    return anyio.run(run)


def test_a_server_refuses_to_start_on_an_index_built_for_the_other_profile(
    seed_built_store,
):
    answer = start_up(build_application())
    assert answer["type"] == "lifespan.startup.failed"
    assert "'seed'" in answer["message"]
    assert "manage.py reindex_taproot" in answer["message"]
    # migrate runs the system checks; the refusal is not one of them.
    call_command("migrate", verbosity=0)
    call_command("reindex_taproot", stdout=StringIO())
    assert index_mismatch() is None
    assert start_up(build_application())["type"] == "lifespan.startup.complete"


def test_reindex_rebuilds_the_index_for_the_active_profile(user, seed_built_store):
    seed_state = index_state(user)
    assert ("in", True) in {(key, kw) for _, key, kw in seed_state["tokens"]}  # no stop words
    out = StringIO()
    call_command("reindex_taproot", stdout=out)
    assert "1 account(s), 3 memories" in out.getvalue()
    state = index_state(user)
    running = seed_built_store.pk
    assert {(key, kw) for memory, key, kw in state["tokens"] if memory == running} == {
        ("run", True),
        ("garden", True),
        ("home", True),
        ("morn", False),
    }
    # Only live memories are indexed; tags are kept for all of them.
    live = set(Memory.objects.for_owner(user).live().values_list("pk", flat=True))
    assert {memory for memory, _, _ in state["tokens"]} == live
    assert {entry[0] for entry in state["entries"]} == live
    assert state["index"] == ("taproot", 2)
    assert state["tags"] == seed_state["tags"]


def test_running_reindex_twice_changes_nothing(user, other_user, seed_built_store, make_memory):
    make_memory(owner=other_user, gist="Someone else's garden")
    call_command("reindex_taproot", "--batch-size", "1", stdout=StringIO())
    first = {owner.pk: index_state(owner) for owner in (user, other_user)}
    call_command("reindex_taproot", stdout=StringIO())
    assert {owner.pk: index_state(owner) for owner in (user, other_user)} == first


def test_reindex_of_one_user_leaves_the_others_alone(user, other_user, seed_built_store, settings):
    settings.TAPROOT_RANKING = "seed"
    remember(owner=other_user, category="episodic", content="Kayak trip", gist="Kayak", now=NOW)
    settings.TAPROOT_RANKING = "taproot"
    before = index_state(other_user)
    call_command("reindex_taproot", "--user", user.username, stdout=StringIO())
    assert index_state(other_user) == before
    assert index_state(user)["index"] == ("taproot", 2)
    # The other account is still on the seed index, so the server still refuses.
    assert "1 account(s)" in index_mismatch()


def test_reindex_names_an_unknown_user_plainly():
    with unchanged(), pytest.raises(CommandError, match="No account is named 'nobody'"):
        call_command("reindex_taproot", "--user", "nobody", stdout=StringIO())


def test_reindex_gives_memories_written_without_the_embedder_their_vectors(
    user, make_memory, settings
):
    settings.TAPROOT_EMBEDDER = "none"
    memory = make_memory(gist="Vegetarian", content="Maya does not eat meat or fish.")
    assert not MemoryVector.objects.filter(memory=memory).exists()
    settings.TAPROOT_EMBEDDER = "wordllama"
    # Without a vector the memory cannot be found by meaning alone ...
    assert recall(owner=user, query="vegan food preferences", now=NOW)["count"] == 0
    call_command("reindex_taproot", stdout=StringIO())
    assert MemoryVector.objects.filter(memory=memory).exists()
    # ... and with one it can.
    [found] = recall(owner=user, query="vegan food preferences", now=NOW)["results"]
    assert found["matched_by"] == "meaning"


class Terminal(StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("on_a_terminal", [True, False])
def test_reindex_shows_progress_on_a_terminal_only(user, make_memory, monkeypatch, on_a_terminal):
    for i in range(3):
        make_memory(gist=f"Memory {i}")
    stderr = Terminal() if on_a_terminal else StringIO()
    monkeypatch.setattr("sys.stderr", stderr)
    call_command("reindex_taproot", stdout=StringIO())
    if on_a_terminal:
        assert "3/3" in stderr.getvalue()
        assert "memories" in stderr.getvalue()
    else:
        assert stderr.getvalue() == ""
