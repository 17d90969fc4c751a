"""Was the memory loaded? Each taproot_reflect call is recorded; remember and recall replies
carry a reflect_hint exactly while a reflect is due."""

from datetime import timedelta

import pytest
from django.test import override_settings

from mcp_bridge.handlers import REFLECT_HINTS, close, recall, reflect_hint, remember, status
from memories.models import ReflectCall
from memories.services import ReflectDue, loaded, record_reflect, reflect, reflect_history
from memories.services.loaded import COALESCE_WINDOW, RECENT_REFLECT_DAYS
from tests.conftest import NOW

NEVER_LOADED_HINT = REFLECT_HINTS[ReflectDue.NEVER_LOADED]
CLOSED_SINCE_HINT = REFLECT_HINTS[ReflectDue.CLOSED_SINCE]
STALE_HINT = REFLECT_HINTS[ReflectDue.STALE]

pytestmark = pytest.mark.django_db

HOUR = timedelta(hours=1)
MS = timedelta(milliseconds=1)


def remembered(user, now):
    return remember(
        owner=user, category="episodic", content="Something new.", gist="Something new", now=now
    )


def test_a_reflect_call_is_recorded_with_its_client(user):
    record_reflect(owner=user, client_id="abc", client_name="Claude", now=NOW)
    call = ReflectCall.objects.get()
    assert (call.owner, call.called_at, call.client_id, call.client_name) == (
        user,
        NOW,
        "abc",
        "Claude",
    )
    history = reflect_history(owner=user, now=NOW)
    assert (history.last_at, history.last_client, history.last_7_days) == (NOW, "Claude", 1)


def test_calls_older_than_a_week_are_forgotten_as_new_ones_come(user, other_user):
    week = timedelta(days=RECENT_REFLECT_DAYS)
    record_reflect(owner=user, client_id="a", now=NOW - week - timedelta(seconds=1))
    record_reflect(owner=user, client_id="b", now=NOW - week)
    record_reflect(owner=other_user, now=NOW - timedelta(days=30))
    record_reflect(owner=user, client_id="a", now=NOW)
    assert sorted(ReflectCall.objects.filter(owner=user).values_list("called_at", flat=True)) == [
        NOW - timedelta(days=RECENT_REFLECT_DAYS),
        NOW,
    ]
    assert ReflectCall.objects.filter(owner=other_user).count() == 1  # not bob's to forget
    assert reflect_history(owner=user, now=NOW).last_7_days == 2


def test_the_hint_is_due_before_any_reflect(user):
    assert reflect_hint(owner=user, now=NOW) == NEVER_LOADED_HINT
    assert remembered(user, NOW)["reflect_hint"] == NEVER_LOADED_HINT
    assert recall(owner=user, query="something", now=NOW)["reflect_hint"] == NEVER_LOADED_HINT


def test_no_hint_right_after_a_reflect(user):
    record_reflect(owner=user, now=NOW)
    assert reflect_hint(owner=user, now=NOW) is None
    assert "reflect_hint" not in remembered(user, NOW + HOUR)
    assert "reflect_hint" not in recall(owner=user, query="something", now=NOW + HOUR)


def test_the_hint_is_due_after_a_close_newer_than_the_last_reflect(user):
    record_reflect(owner=user, now=NOW)
    close(owner=user, reflection="Bye.", now=NOW)  # the same moment: not newer
    assert reflect_hint(owner=user, now=NOW + HOUR) is None
    close(owner=user, reflection="Bye again.", now=NOW + HOUR)
    assert reflect_hint(owner=user, now=NOW + 2 * HOUR) == CLOSED_SINCE_HINT
    assert remembered(user, NOW + 2 * HOUR)["reflect_hint"] == CLOSED_SINCE_HINT
    record_reflect(owner=user, now=NOW + 3 * HOUR)
    assert reflect_hint(owner=user, now=NOW + 3 * HOUR) is None


def test_the_hint_is_due_once_the_nudge_hours_have_passed(user):
    record_reflect(owner=user, now=NOW)
    assert reflect_hint(owner=user, now=NOW + 12 * HOUR) is None  # exactly 12 hours: not yet
    late = NOW + 12 * HOUR + timedelta(microseconds=1)
    assert reflect_hint(owner=user, now=late) == STALE_HINT.format(hours=12)


@override_settings(TAPROOT_REFLECT_NUDGE_HOURS=2)
def test_the_nudge_hours_follow_the_setting(user):
    record_reflect(owner=user, now=NOW)
    assert reflect_hint(owner=user, now=NOW + 2 * HOUR) is None
    assert "2 hours" in reflect_hint(owner=user, now=NOW + 3 * HOUR)


def test_another_users_reflects_and_closings_do_not_count(user, other_user):
    record_reflect(owner=other_user, now=NOW)
    assert reflect_hint(owner=user, now=NOW) == NEVER_LOADED_HINT
    record_reflect(owner=user, now=NOW)
    close(owner=other_user, reflection="Bob's goodbye.", now=NOW + HOUR)
    assert reflect_hint(owner=user, now=NOW + HOUR) is None


def test_status_and_the_payload_builder_are_not_reflects(user, make_memory):
    make_memory(core=True)
    reflect(owner=user, now=NOW)
    status(owner=user, now=NOW)
    assert reflect_hint(owner=user, now=NOW) == NEVER_LOADED_HINT
    assert not ReflectCall.objects.exists()


def test_the_hint_is_one_line(user):
    for hint in (NEVER_LOADED_HINT, CLOSED_SINCE_HINT, STALE_HINT.format(hours=12)):
        assert "\n" not in hint and "taproot_reflect" in hint


# --- bounded: calls coalesce into loads, and a user keeps a fixed number --------------

SECOND = timedelta(seconds=1)


def test_a_burst_of_calls_from_one_client_is_one_load(user):
    """One token once made 1,500 records in seconds: now they are one load, at the last."""
    for i in range(1500):
        record_reflect(owner=user, client_id="abc", client_name="Claude", now=NOW + i * 30 * MS)
    last = NOW + 1499 * 30 * MS

    assert ReflectCall.objects.count() == 1
    history = reflect_history(owner=user, now=last)
    assert (history.last_at, history.last_client, history.last_7_days) == (last, "Claude", 1)


def test_calls_more_than_a_minute_apart_are_separate_loads(user):
    record_reflect(owner=user, client_id="abc", now=NOW)
    record_reflect(owner=user, client_id="abc", now=NOW + COALESCE_WINDOW)  # the same load
    later = NOW + 2 * COALESCE_WINDOW + MS
    record_reflect(owner=user, client_id="abc", now=later)  # a minute and a tick after it

    assert sorted(ReflectCall.objects.values_list("called_at", flat=True)) == [
        NOW + COALESCE_WINDOW,
        later,
    ]
    assert reflect_history(owner=user, now=later).last_7_days == 2


def test_a_call_recorded_late_does_not_move_a_load_back(user):
    record_reflect(owner=user, client_id="abc", now=NOW)
    record_reflect(owner=user, client_id="abc", now=NOW - 10 * SECOND)
    assert list(ReflectCall.objects.values_list("called_at", flat=True)) == [NOW]


def test_each_client_and_each_user_has_loads_of_its_own(user, other_user):
    record_reflect(owner=user, client_id="a", client_name="Claude", now=NOW)
    record_reflect(owner=user, client_id="b", client_name="Claude Code", now=NOW + SECOND)
    record_reflect(owner=other_user, client_id="a", client_name="Claude", now=NOW + SECOND)

    history = reflect_history(owner=user, now=NOW + SECOND)
    assert (history.last_client, history.last_7_days) == ("Claude Code", 2)
    assert reflect_history(owner=other_user, now=NOW + SECOND).last_7_days == 1


def test_a_user_keeps_only_the_newest_loads(user, other_user, monkeypatch):
    monkeypatch.setattr(loaded, "MAX_KEPT_LOADS", 20)
    record_reflect(owner=other_user, now=NOW)
    for i in range(25):
        record_reflect(owner=user, client_id=f"client {i % 3}", now=NOW + i * 2 * COALESCE_WINDOW)
    last = NOW + 24 * 2 * COALESCE_WINDOW

    kept = sorted(ReflectCall.objects.filter(owner=user).values_list("called_at", flat=True))
    assert kept == [NOW + i * 2 * COALESCE_WINDOW for i in range(5, 25)]
    history = reflect_history(owner=user, now=last)
    assert (history.last_at, history.last_7_days) == (last, 20)
    assert ReflectCall.objects.filter(owner=other_user).count() == 1  # not bob's to forget


@pytest.mark.parametrize("loads", [1, 300])
def test_the_loaded_reads_take_the_same_queries_whatever_the_number_of_loads(
    user, loads, django_assert_num_queries
):
    for i in range(loads):
        record_reflect(owner=user, client_id=f"client {i % 7}", now=NOW + i * 2 * COALESCE_WINDOW)
    last = NOW + (loads - 1) * 2 * COALESCE_WINDOW

    with django_assert_num_queries(1):
        assert reflect_history(owner=user, now=last).last_7_days == loads
    with django_assert_num_queries(1):
        assert reflect_hint(owner=user, now=last) is None
    # The whole status of an empty store: reflect's reads, the counts, the reflect history,
    # the three suggestion rules (no short ids to find).
    with django_assert_num_queries(8):
        assert status(owner=user, now=last)["reflects_last_7_days"] == loads
