"""Every tool's success path through a real server and the real client, in both eras
(SPEC §4-§8). The services have their own tests; these check what reaches the client."""

import json
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from mcp_bridge.handlers import status
from memories.jsonutil import dumps
from memories.models import Closing, Memory, ReflectCall, Snapshot
from memories.services import reflect
from tests.conftest import SPEC_RECORD_KEYS
from tests.mcp.tokens import make_application
from tests.store import store_state, unchanged

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.server]

CATEGORY_ORDER = ["identity", "relationship", "active_thread", "error", "episodic"]


def fresh_store():
    """Empty the store between the two eras of one test."""
    Memory.objects.all().delete()
    Closing.objects.all().delete()
    Snapshot.objects.all().delete()


def recent(**overrides):
    """Fields for a memory written a day ago (inside the catalog window)."""
    moment = timezone.now() - timedelta(days=1)
    return {"created_at": moment, "updated_at": moment, **overrides}


# --- taproot_reflect ---------------------------------------------------------------


def test_reflect_sends_the_payload_exactly_as_the_service_builds_it(eras, make_memory, user):
    for mcp in eras:
        fresh_store()
        make_memory(**recent(core=True, category="identity", content="I am Claude, curious."))
        make_memory(**recent(gist="Planning the spring garden"))
        make_memory(**recent(gist="Gone", archived_at=timezone.now()))
        before = store_state()
        text = mcp.call("taproot_reflect").content[0].text
        after = store_state()
        # Its one write is the record of the call (tested below).
        del before[ReflectCall._meta.label], after[ReflectCall._meta.label]
        assert after == before
        assert text == dumps(json.loads(text))  # compact, serialised once
        payload = json.loads(text)
        assert payload == reflect(owner=user).payload
        assert list(payload) == [
            "status",
            "usage_note",
            "core_memories",
            "core_count",
            "catalog",
            "catalog_count",
            "catalog_note",
            "budget",
        ]
        assert list(payload["core_memories"]) == ["identity"]
        assert payload["core_memories"]["identity"][0]["content"] == "I am Claude, curious."
        assert payload["catalog_count"] == 1
        assert payload["catalog"]["episodic"][-1].endswith("Planning the spring garden")
        assert "Gone" not in text


def test_the_dashboard_preview_shows_exactly_what_the_tool_sends(eras, make_memory, user, client):
    import html

    make_memory(**recent(core=True, category="identity", content="I am Claude, curious."))
    make_memory(**recent(gist="Planning the spring garden"))
    make_memory(**recent(gist="Old and quiet", updated_at=timezone.now() - timedelta(days=90)))
    Closing.objects.create(owner=user, reflection="We spoke of seeds.", created_at=timezone.now())
    client.force_login(user)
    for mcp in eras:
        text = mcp.call("taproot_reflect").content[0].text
        page = client.get("/dashboard/preview/").text
        raw = page.split('<pre class="raw-json" tabindex="0">', 1)[1].split("</pre>", 1)[0]
        assert html.unescape(raw) == text


def test_reflect_on_an_empty_store_leaves_out_empty_lists(eras):
    for mcp in eras:
        payload = mcp.reply("taproot_reflect")
        assert payload["core_count"] == 0
        assert payload["catalog_count"] == 0
        assert payload["catalog"] == payload["core_memories"] == {}
        assert "recent_closings" not in payload and "catalog_omitted" not in payload


def test_each_reflect_tool_call_is_recorded_with_its_client_and_status_is_not(
    eras, user, token_for, connect
):
    for mcp in eras:
        mcp.reply("taproot_status")
        assert not ReflectCall.objects.exists()
        mcp.call("taproot_reflect")
        call = ReflectCall.objects.get()
        assert (call.owner, call.client_name) == (user, "Test client")
        assert timezone.now() - call.called_at < timedelta(minutes=1)
        reply = mcp.reply("taproot_status")
        assert reply["reflects_last_7_days"] == 1
        assert reply["last_reflect_at"] == call.called_at.isoformat().replace("+00:00", "Z")
        ReflectCall.objects.all().delete()
    claude = connect(token_for(user, application=make_application(name="Claude")))
    claude.call("taproot_reflect")
    assert ReflectCall.objects.get().client_name == "Claude"


def test_remember_and_recall_ask_for_a_reflect_until_one_is_made(eras):
    for mcp in eras:
        fresh_store()
        ReflectCall.objects.all().delete()
        created = mcp.reply(
            "taproot_remember", {"category": "episodic", "content": "Tea.", "gist": "Tea"}
        )
        assert "taproot_reflect" in created["reflect_hint"]
        assert "taproot_reflect" in mcp.reply("taproot_recall", {"query": "tea"})["reflect_hint"]
        mcp.call("taproot_reflect")
        assert "reflect_hint" not in mcp.reply("taproot_recall", {"query": "tea"})
        assert "reflect_hint" not in mcp.reply(
            "taproot_remember", {"update_id": created["memory_id"][:8], "gist": "Green tea"}
        )
        mcp.reply("taproot_close", {"reflection": "Bye."})
        assert "reflect_hint" in mcp.reply("taproot_recall", {"query": "tea"})


def test_tools_take_the_short_ids_the_payload_shows_and_reply_with_whole_ids(eras, make_memory):
    for mcp in eras:
        fresh_store()
        memory = make_memory(**recent(gist="Planning the spring garden"))
        heading, line = mcp.reply("taproot_reflect")["catalog"]["episodic"]
        assert heading.endswith(":")
        short = line[1 : line.index("]")]
        assert short == str(memory.pk)[:8]
        recalled = mcp.reply("taproot_recall", {"ids": [short]})
        assert [r["id"] for r in recalled["results"]] == [str(memory.pk)]
        promoted = mcp.reply("taproot_promote", {"memory_id": short, "core": True})
        assert promoted["memory_id"] == str(memory.pk)
        archived = mcp.reply("taproot_forget", {"action": "archive", "memory_id": short})
        assert archived["memory_id"] == str(memory.pk)


def test_every_id_argument_takes_an_all_digit_short_id_sent_as_a_json_number(eras, make_memory):
    """The MCP Inspector sends `memory_id=12345678` as the number 12345678: it is read as
    the short id 12345678, wherever a tool takes an id."""
    for mcp in eras:
        fresh_store()
        first = make_memory(id=uuid.UUID("12345678-9abc-4def-8123-456789abcdef"), gist="First")
        second = make_memory(id=uuid.UUID("87654321-9abc-4def-8123-456789abcdef"), gist="Second")
        whole = str(first.pk)

        def recalled(ids, mcp=mcp):
            return [record["id"] for record in mcp.reply("taproot_recall", {"ids": ids})["results"]]

        assert recalled([12345678]) == [whole]
        assert recalled(12345678) == [whole]  # a bare id, like a bare string, is a list of one
        assert recalled("[12345678, 87654321]") == [whole, str(second.pk)]
        promoted = mcp.reply("taproot_promote", {"memory_id": 12345678, "core": True})
        assert promoted["memory_id"] == whole
        updated = mcp.reply(
            "taproot_remember", {"update_id": 12345678, "linked_memories": [87654321]}
        )
        assert updated == {**updated, "action": "updated", "memory_id": whole}
        assert Memory.objects.get(pk=first.pk).linked_memories == [str(second.pk)]
        archive = {"action": "archive", "memory_id": 87654321}
        assert mcp.reply("taproot_forget", archive)["memory_id"] == str(second.pk)
        unarchive = {"action": "unarchive", "memory_id": 87654321}
        assert mcp.reply("taproot_forget", unarchive)["memory_id"] == str(second.pk)
        compress = {"action": "compress", "ids": [12345678, 87654321], "content": "Both."}
        compressed = mcp.reply("taproot_forget", {**compress, "gist": "Both"})
        assert sorted(compressed["archived"]) == sorted([whole, str(second.pk)])
        delete = {"action": "delete", "memory_id": 12345678}
        assert mcp.reply("taproot_forget", delete)["memory_id"] == whole
        assert not Memory.objects.filter(pk=first.pk).exists()


# --- taproot_remember --------------------------------------------------------------


def test_remember_creates_a_memory_with_every_field(eras, user):
    for mcp in eras:
        fresh_store()
        reply = mcp.reply(
            "taproot_remember",
            {
                "category": "relationship",
                "content": "Sam prefers morning calls and hates small talk.",
                "gist": "Sam: mornings, no small talk",
                "salience": "high",
                "core": True,
                "epistemic_status": "observed",
                "provenance": "Sam said so",
                "tags": ["sam", "calls"],
                "search_keywords": ["schedule"],
                "conversation_id": "c-1",
                "transcript_ref": "t-1",
                "conversation_url": "https://claude.ai/chat/1",
            },
        )
        # No reflect yet in this conversation: the reply asks for one.
        assert list(reply) == ["status", "action", "memory_id", "category", "core", "reflect_hint"]
        assert reply["action"] == "created"
        assert reply["category"] == "relationship"
        assert reply["core"] is True
        memory = Memory.objects.get(pk=reply["memory_id"])
        assert memory.owner == user
        assert memory.salience == "high"
        assert memory.tags == ["sam", "calls"]
        assert memory.search_keywords == ["schedule"]
        assert memory.gist_autogenerated is False
        assert memory.conversation_url == "https://claude.ai/chat/1"


def test_remember_keeps_content_that_looks_like_json_as_text(eras):
    for mcp in eras:
        content = '{"note": "this is a JSON-looking memory"}'
        reply = mcp.reply(
            "taproot_remember", {"category": "episodic", "content": content, "gist": "null"}
        )
        memory = Memory.objects.get(pk=reply["memory_id"])
        assert memory.content == content
        assert memory.gist == "null"


def test_remember_accepts_double_encoded_and_bare_string_lists(eras):
    for mcp in eras:
        reply = mcp.reply(
            "taproot_remember",
            {
                "category": "episodic",
                "content": "Tea ceremony in Kyoto.",
                "gist": "Kyoto tea ceremony",
                "tags": '["travel", "japan"]',
                "search_keywords": "matcha",
            },
        )
        memory = Memory.objects.get(pk=reply["memory_id"])
        assert memory.tags == ["travel", "japan"]
        assert memory.search_keywords == ["matcha"]


def test_remember_coerces_legacy_values_with_warnings(eras):
    for mcp in eras:
        fresh_store()
        reply = mcp.reply(
            "taproot_remember",
            {
                "category": " Identity_Observations ",
                "content": "I explain with examples first.",
                "gist": "I lead with examples",
                "salience": "3",
                "core": "true",
            },
        )
        assert reply["category"] == "identity"
        assert reply["core"] is True
        assert len(reply["warnings"]) == 2
        assert "identity" in reply["warnings"][0]
        assert "high" in reply["warnings"][1]
        assert Memory.objects.get(pk=reply["memory_id"]).salience == "high"


def test_remember_updates_only_the_fields_given(eras, make_memory):
    for mcp in eras:
        memory = make_memory(**recent(tags=["old"], salience="low", gist="Old gist"))
        reply = mcp.reply(
            "taproot_remember",
            {
                "update_id": str(memory.pk),
                "category": "episodic",
                "content": "Rewritten content.",
            },
        )
        assert reply["action"] == "updated"
        assert reply["memory_id"] == str(memory.pk)
        fresh = Memory.objects.get(pk=memory.pk)
        assert fresh.content == "Rewritten content."
        assert fresh.gist == "Old gist"
        assert fresh.tags == ["old"]
        assert fresh.salience == "low"
        assert fresh.updated_at > memory.updated_at


def test_remember_with_only_update_id_and_salience_changes_just_the_salience(eras, make_memory):
    for mcp in eras:
        memory = make_memory(**recent(category="identity", content="Kept.", salience="low"))
        reply = mcp.reply("taproot_remember", {"update_id": str(memory.pk), "salience": "high"})
        assert (reply["action"], reply["memory_id"]) == ("updated", str(memory.pk))
        assert reply["category"] == "identity"
        fresh = Memory.objects.get(pk=memory.pk)
        assert (fresh.salience, fresh.category, fresh.content) == ("high", "identity", "Kept.")
        assert fresh.gist == memory.gist and fresh.tags == memory.tags
        (revision,) = fresh.revisions.all()
        assert revision.changed_fields == ["salience"]


def test_remember_warns_about_a_duplicate_and_still_writes(eras, make_memory):
    for mcp in eras:
        fresh_store()
        existing = make_memory(**recent(content="The cat is called Miso.", gist="Cat named Miso"))
        reply = mcp.reply(
            "taproot_remember",
            {"category": "episodic", "content": "the cat is called  MISO", "gist": "Miso the cat"},
        )
        assert reply["action"] == "created"
        assert str(existing.pk) in reply["warnings"][0]
        assert Memory.objects.count() == 2


def test_remember_drops_links_that_are_not_the_callers_with_a_warning(
    eras, make_memory, other_user
):
    for mcp in eras:
        fresh_store()
        mine = make_memory(**recent())
        theirs = make_memory(**recent(owner=other_user))
        reply = mcp.reply(
            "taproot_remember",
            {
                "category": "episodic",
                "content": "Linked up.",
                "gist": "Linked",
                "linked_memories": [str(mine.pk), str(theirs.pk)],
            },
        )
        assert Memory.objects.get(pk=reply["memory_id"]).linked_memories == [str(mine.pk)]
        assert str(theirs.pk) in reply["warnings"][0]


def test_remember_names_arguments_it_does_not_know(eras):
    for mcp in eras:
        fresh_store()
        reply = mcp.reply(
            "taproot_remember",
            {"category": "episodic", "content": "x y z", "gist": "xyz", "salence": "high"},
        )
        assert reply["warnings"] == ["Ignored unknown argument(s): 'salence'."]


# --- taproot_recall ----------------------------------------------------------------


def test_recall_by_query_returns_full_records_and_strengthens_them(eras, make_memory):
    for mcp in eras:
        fresh_store()
        hit = make_memory(**recent(content="We hiked the ridge trail in fog.", gist="Ridge hike"))
        miss = make_memory(**recent(content="Tax forms are due.", gist="Taxes"))
        reply = mcp.reply("taproot_recall", {"query": "ridge hike"})
        assert reply["count"] == 1
        record = reply["results"][0]
        assert set(record) == {*SPEC_RECORD_KEYS, "activation_score"}
        assert record["id"] == str(hit.pk)
        assert record["retrieval_count"] == 1
        assert record["last_retrieved"] is not None
        assert isinstance(record["activation_score"], float)
        assert Memory.objects.get(pk=hit.pk).retrieval_count == 1
        assert Memory.objects.get(pk=miss.pk).retrieval_count == 0
        assert Memory.objects.get(pk=hit.pk).updated_at == hit.updated_at


def test_recall_by_ids_skips_archived_unknown_and_foreign_ids(eras, make_memory, other_user):
    for mcp in eras:
        fresh_store()
        first = make_memory(**recent())
        second = make_memory(**recent())
        archived = make_memory(**recent(archived_at=timezone.now()))
        foreign = make_memory(**recent(owner=other_user))
        ids = [str(m.pk) for m in (first, second, archived, foreign)] + [str(uuid.uuid4())]
        reply = mcp.reply("taproot_recall", {"ids": json.dumps(ids)})
        assert {r["id"] for r in reply["results"]} == {str(first.pk), str(second.pk)}
        assert Memory.objects.get(pk=foreign.pk).retrieval_count == 0


def test_recall_filters_by_category_tags_and_since_and_respects_limit(eras, make_memory):
    for mcp in eras:
        fresh_store()
        old = datetime(2020, 1, 1, tzinfo=UTC)
        make_memory(category="error", tags=["code"], created_at=old, updated_at=old)
        wanted = make_memory(**recent(category="error", tags=["code", "python"]))
        make_memory(**recent(category="episodic", tags=["code", "python"]))
        reply = mcp.reply(
            "taproot_recall",
            {"category": "error", "tags": "code", "since": "2026-01-01T00:00:00Z", "limit": "5"},
        )
        assert [r["id"] for r in reply["results"]] == [str(wanted.pk)]
        for _ in range(3):
            make_memory(**recent())
        assert mcp.reply("taproot_recall", {"limit": 2})["count"] == 2


def test_recall_stops_before_100000_characters_and_says_so(eras, make_memory):
    for mcp in eras:
        fresh_store()
        for i in range(8):
            make_memory(**recent(content=f"{i} " + "w" * 19_990, gist=f"Big {i}"))
        text = mcp.call("taproot_recall", {"limit": 8}).content[0].text
        reply = json.loads(text)
        assert reply["truncated"] is True
        assert 1 <= reply["count"] < 8
        assert len(text) <= 100_000
        strengthened = Memory.objects.filter(retrieval_count=1).values_list("pk", flat=True)
        assert {str(pk) for pk in strengthened} == {r["id"] for r in reply["results"]}


# --- taproot_promote ---------------------------------------------------------------


def test_promote_sets_core_and_salience_and_bumps_updated_at(eras, make_memory):
    for mcp in eras:
        fresh_store()
        memory = make_memory(**recent())
        reply = mcp.reply(
            "taproot_promote", {"memory_id": str(memory.pk), "core": True, "salience": "high"}
        )
        assert reply == {
            "status": "ok",
            "memory_id": str(memory.pk),
            "core": True,
            "salience": "high",
        }
        fresh = Memory.objects.get(pk=memory.pk)
        assert fresh.core is True
        assert fresh.updated_at > memory.updated_at
        assert mcp.reply("taproot_reflect")["core_count"] == 1


# --- taproot_forget ----------------------------------------------------------------


def test_archive_hides_a_memory_and_unarchive_brings_it_back(eras, make_memory):
    for mcp in eras:
        fresh_store()
        memory = make_memory(**recent(gist="Old address", content="Lived at Elm Street."))
        reply = mcp.reply(
            "taproot_forget", {"action": "archive", "memory_id": str(memory.pk), "reason": "moved"}
        )
        assert reply["action"] == "archived"
        assert reply["memory_id"] == str(memory.pk)
        assert Memory.objects.get(pk=memory.pk).archive_reason == "moved"
        assert mcp.reply("taproot_recall", {"query": "elm street"})["count"] == 0
        assert "Old address" not in json.dumps(mcp.reply("taproot_reflect"))
        again = mcp.reply("taproot_forget", {"action": "archive", "memory_id": str(memory.pk)})
        assert again["changed"] is False
        assert "already" in again["message"]
        back = mcp.reply("taproot_forget", {"action": "unarchive", "memory_id": str(memory.pk)})
        assert back["action"] == "unarchived"
        assert mcp.reply("taproot_recall", {"query": "elm street"})["count"] == 1


def test_delete_removes_the_memory(eras, make_memory):
    for mcp in eras:
        memory = make_memory(**recent())
        reply = mcp.reply("taproot_forget", {"action": "delete", "memory_id": str(memory.pk)})
        assert reply == {"status": "ok", "action": "deleted", "memory_id": str(memory.pk)}
        assert not Memory.objects.filter(pk=memory.pk).exists()


def test_compress_writes_one_memory_and_archives_the_originals(eras, make_memory):
    for mcp in eras:
        fresh_store()
        first = make_memory(**recent(category="episodic", salience="low", tags=["a"]))
        second = make_memory(**recent(category="episodic", salience="high", tags=["b"], core=True))
        reply = mcp.reply(
            "taproot_forget",
            {
                "action": "compress",
                "ids": [str(first.pk), str(second.pk)],
                "content": "Two trips, one summary.",
                "gist": "Both trips in one",
            },
        )
        assert reply["action"] == "compressed"
        assert sorted(reply["archived"]) == sorted([str(first.pk), str(second.pk)])
        new = Memory.objects.get(pk=reply["memory_id"])
        assert new.salience == "high"
        assert new.core is True
        assert sorted(new.tags) == ["a", "b"]
        assert new.compression_level == 1
        for original in (first, second):
            fresh = Memory.objects.get(pk=original.pk)
            assert fresh.archived_at is not None
            assert fresh.archive_reason == f"compressed into {new.pk}"


# --- taproot_close -----------------------------------------------------------------


def test_close_stores_the_reflection_and_says_goodbye(eras, user):
    for mcp in eras:
        fresh_store()
        reply = mcp.reply(
            "taproot_close",
            {"reflection": "We planned the garden.", "conversation_title": "Garden"},
        )
        assert reply["action"] == "closed"
        assert reply["message"] == "Reflection stored. Safe travels."
        closing = Closing.objects.get(pk=reply["reflection_id"])
        assert closing.owner == user
        assert closing.conversation_title == "Garden"
        closings = mcp.reply("taproot_reflect")["recent_closings"]
        assert closings[0]["reflection"] == "We planned the garden."


# --- taproot_migrate ---------------------------------------------------------------


def test_migrate_normalises_drift_once_and_then_changes_nothing(eras, make_memory, user):
    for mcp in eras:
        fresh_store()
        drifted = make_memory(**recent(category="event", salience="3", tags="trip", gist=""))
        reply = mcp.reply("taproot_migrate")
        assert list(reply) == [
            "status",
            "dry_run",
            "migrated",
            "already_migrated",
            "total",
            "snapshot_id",
            "category_counts_before",
            "category_counts_after",
            "message",
        ]
        assert (reply["status"], reply["dry_run"]) == ("ok", False)
        assert (reply["migrated"], reply["already_migrated"], reply["total"]) == (1, 0, 1)
        assert reply["message"].startswith("Normalised 1 of 1 memories;")
        assert reply["snapshot_id"] is not None
        assert reply["category_counts_before"] == {"event": 1}
        assert reply["category_counts_after"] == {"episodic": 1}
        fresh = Memory.objects.get(pk=drifted.pk)
        assert (fresh.category, fresh.salience, fresh.tags) == ("episodic", "high", ["trip"])
        assert fresh.gist
        assert fresh.content == drifted.content
        snapshots = Snapshot.objects.count()
        again = mcp.reply("taproot_migrate")
        assert (again["migrated"], again["already_migrated"]) == (0, 1)
        assert again["snapshot_id"] is None
        assert Snapshot.objects.count() == snapshots


# --- taproot_status ----------------------------------------------------------------


def test_status_counts_and_measures_the_payload_reflect_sends(eras, make_memory, user):
    for mcp in eras:
        fresh_store()
        make_memory(**recent(category="identity", core=True))
        make_memory(**recent(category="episodic"))
        make_memory(**recent(archived_at=timezone.now()))
        Closing.objects.create(owner=user, reflection="Bye.", created_at=timezone.now())
        with unchanged():
            reply = mcp.reply("taproot_status")
        assert reply == status(owner=user)
        assert reply["live_memories"] == 2
        assert reply["archived"] == 1
        assert reply["closings"] == 1
        assert reply["core_count"] == 1
        text = mcp.call("taproot_reflect").content[0].text
        assert reply["reflect_payload"]["bytes"] == len(text.encode())
        assert reply["reflect_payload"]["tokens"] == -(-len(text) // 4)
