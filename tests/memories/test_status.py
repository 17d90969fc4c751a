import math
from datetime import timedelta

import pytest
from django.test import override_settings

from memories.models import Closing
from memories.services import reflect, status
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
def test_status_counts_lines_cut_by_the_budget(user, make_memory):
    for i in range(20):
        make_memory(gist=f"A recent line of some length, number {i}")
    make_memory(updated_at=OLD)
    reply = status(owner=user, now=NOW)
    catalog = reply["catalog"]
    assert catalog["cut_by_budget"] > 0
    assert catalog["included"] + catalog["cut_by_budget"] == 20
    assert catalog["omitted"] == catalog["cut_by_budget"] + 1
    assert catalog["omitted_by_window"] == 1
    assert reply["reflect_payload"]["tokens"] <= 700
    assert reply["reflect_payload"]["max_tokens"] == 700


@override_settings(REFLECT_MAX_TOKENS=400)
def test_status_carries_the_budget_warnings(user, make_memory):
    make_memory(core=True, category="identity", content="x" * 3000)
    warnings = status(owner=user, now=NOW)["warnings"]
    assert len(warnings) == 2  # over the budget, and core past half of it
    assert warnings == reflect(owner=user, now=NOW).warnings


@pytest.mark.parametrize("size", [5, 150])
def test_status_query_count_does_not_grow_with_the_store(
    user, make_memory, django_assert_max_num_queries, size
):
    for i in range(size):
        make_memory(core=i % 7 == 0, updated_at=NOW - timedelta(days=i))
    with django_assert_max_num_queries(8):
        assert status(owner=user, now=NOW)["live_memories"] == size
