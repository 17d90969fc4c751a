import math
from datetime import timedelta

import pytest
from django.test import override_settings

from mcp_bridge.handlers import status
from memories.models import Closing, ReflectCall
from memories.services import record_reflect, reflect
from tests.conftest import NOW

pytestmark = pytest.mark.django_db

OLD = NOW - timedelta(days=100)


@pytest.fixture
def store(user, other_user, make_memory):
    make_memory(category="identity", core=True, content="I am Claude.")
    make_memory(category="relationship", core=True, content="Sam likes brevity.")
    make_memory(category="episodic", gist="Recent trip")
    make_memory(category="episodic", updated_at=OLD)
    make_memory(category="error", updated_at=OLD, salience="high")
    make_memory(category="active_thread", updated_at=OLD, salience="low")
    make_memory(category="project", gist="Drifted category")  # counted where it belongs
    make_memory(category="episodic", archived_at=NOW, archive_reason="done")
    make_memory(category="identity", core=True, archived_at=NOW, archive_reason="done")
    make_memory(owner=other_user, category="episodic")
    make_memory(owner=other_user, category="episodic", archived_at=NOW)
    Closing.objects.create(owner=user, reflection="One", created_at=NOW)
    Closing.objects.create(owner=user, reflection="Two", created_at=NOW)
    Closing.objects.create(owner=other_user, reflection="Theirs", created_at=NOW)


@override_settings(CATALOG_WINDOW_DAYS=45)
def test_status_counts_live_archived_closings_and_tiers(user, store):
    reply = status(owner=user, now=NOW)
    assert reply["status"] == "ok"
    assert reply["live_memories"] == 7
    assert reply["live_by_category"] == {
        "identity": 1,
        "relationship": 1,
        "active_thread": 2,
        "error": 1,
        "episodic": 2,
    }
    assert list(reply["live_by_category"]) == [
        "identity",
        "relationship",
        "active_thread",
        "error",
        "episodic",
    ]
    assert reply["archived"] == 2
    assert reply["closings"] == 2
    assert reply["core_count"] == 2
    assert reply["catalog"] == {
        "included": 3,
        "omitted": 2,
        "omitted_by_window": 2,
        "cut_by_budget": 0,
        "window_days": 45,
    }
    assert reply["warnings"] == []


def test_status_measures_exactly_the_reflect_text(user, store):
    text = reflect(owner=user, now=NOW).text
    size = status(owner=user, now=NOW)["reflect_payload"]
    assert size["bytes"] == len(text.encode("utf-8"))
    assert size["kb"] == round(len(text.encode("utf-8")) / 1024, 1)
    assert size["tokens"] == math.ceil(len(text) / 4)
    assert size["max_tokens"] == 8000
    assert 0 < size["core_tokens"] < size["tokens"]
    assert size["core_share_of_budget"] == round(size["core_tokens"] / 8000, 3)


def test_status_measures_multibyte_text_in_bytes(user, make_memory):
    make_memory(core=True, category="identity", content="ü" * 1000)
    size = status(owner=user, now=NOW)["reflect_payload"]
    assert size["bytes"] > size["tokens"] * 4
    assert size["kb"] == round(size["bytes"] / 1024, 1)


@override_settings(CATALOG_WINDOW_DAYS=200)
def test_status_reports_the_window_setting(user, store):
    catalog = status(owner=user, now=NOW)["catalog"]
    assert catalog["window_days"] == 200
    assert catalog["included"] == 5
    assert catalog["omitted"] == 0


@override_settings(REFLECT_MAX_TOKENS=700)
@override_settings(CATALOG_WINDOW_DAYS=45)
def test_status_counts_lines_cut_by_the_budget(user, make_memory):
    for i in range(20):
        make_memory(gist=f"A recent line of some length, number {i} " + "x" * 60)
    make_memory(updated_at=OLD)
    reply = status(owner=user, now=NOW)
    catalog = reply["catalog"]
    assert catalog["cut_by_budget"] > 0
    assert catalog["included"] + catalog["cut_by_budget"] == 20
    assert catalog["omitted"] == catalog["cut_by_budget"] + 1
    assert catalog["omitted_by_window"] == 1
    assert reply["reflect_payload"]["tokens"] <= 700
    assert reply["reflect_payload"]["max_tokens"] == 700


@override_settings(REFLECT_MAX_TOKENS=2000)
def test_status_carries_the_budget_warnings_and_says_how_core_was_sent(user, make_memory):
    for i in range(3):
        make_memory(core=True, category="identity", content="x" * 4000, gist=f"Big {i}")
    reply = status(owner=user, now=NOW)
    warnings = reply["warnings"]
    assert len(warnings) == 2  # core does not fit in full, and takes more than half
    assert warnings == reflect(owner=user, now=NOW).warnings
    assert "Demote" in warnings[0]
    size = reply["reflect_payload"]
    assert size["tokens"] <= 2000
    assert size["core_in_full"] + size["core_as_lines"] + size["core_omitted"] == 3
    assert size["core_as_lines"] >= 1


@pytest.mark.parametrize("size", [5, 150])
def test_status_query_count_does_not_grow_with_the_store(
    user, make_memory, django_assert_max_num_queries, size
):
    for i in range(size):
        make_memory(core=i % 7 == 0, updated_at=NOW - timedelta(days=i))
    # reflect's reads (thirteen at most here: see test_reflect), the archived (kept) and
    # the closings' counts, the reflect history, three suggestion rules and their short
    # ids.
    with django_assert_max_num_queries(20):
        assert status(owner=user, now=NOW)["live_memories"] == size


def test_status_says_when_claude_last_loaded_the_memory(user, other_user):
    before = status(owner=user, now=NOW)
    assert (before["last_reflect_at"], before["reflects_last_7_days"]) == (None, 0)
    for days in (10, 6, 2):
        record_reflect(owner=user, client_name="Claude", now=NOW - timedelta(days=days))
    record_reflect(owner=other_user, now=NOW)
    reply = status(owner=user, now=NOW)
    assert reply["last_reflect_at"] == "2026-11-27T12:00:00Z"
    assert reply["reflects_last_7_days"] == 2


def test_status_and_reflect_themselves_never_count_as_loading_the_memory(user, make_memory):
    make_memory(core=True)
    reflect(owner=user, now=NOW)
    status(owner=user, now=NOW)
    assert status(owner=user, now=NOW)["last_reflect_at"] is None
    assert not ReflectCall.objects.exists()


def test_status_lists_suggestions_with_counts_short_ids_and_reasons(user, make_memory):
    recalled = [
        make_memory(
            retrieval_count=5 + i,
            last_retrieved=NOW - timedelta(days=1),
            updated_at=NOW - timedelta(days=30),
        )
        for i in range(7)
    ]
    idle_core = make_memory(core=True, updated_at=NOW - timedelta(days=200))
    reply = status(owner=user, now=NOW)["suggestions"]
    assert [group["kind"] for group in reply] == ["promote", "demote", "archive"]
    promote, demote, archive = reply
    assert promote["count"] == 7
    # Up to five, the most recalled first, by their short ids.
    assert promote["ids"] == [str(m.pk)[:8] for m in reversed(recalled)][:5]
    assert "recalled at least 5 times" in promote["reason"]
    assert (demote["count"], demote["ids"]) == (1, [str(idle_core.pk)[:8]])
    assert (archive["count"], archive["ids"]) == (0, [])


@pytest.mark.parametrize(
    ("embedder", "says"),
    [
        ("wordllama", "wordllama (l2_supercat, 256 dimensions)"),
        ("none", "off: recall ranks by words alone"),
    ],
)
def test_status_says_what_recall_by_meaning_runs_on(user, settings, embedder, says):
    settings.TAPROOT_EMBEDDER = embedder
    assert status(owner=user, now=NOW)["recall_by_meaning"] == says
