"""Was the memory loaded? Each taproot_reflect call is recorded; remember and recall replies
carry a reflect_hint exactly while a reflect is due."""

from datetime import timedelta

import pytest
from django.test import override_settings

from mcp_bridge.handlers import REFLECT_HINTS, close, recall, reflect_hint, remember, status
from memories.models import ReflectCall
from memories.services import ReflectDue, record_reflect, reflect, reflect_history
from memories.services.loaded import RECENT_REFLECT_DAYS
from tests.conftest import NOW

NEVER_LOADED_HINT = REFLECT_HINTS[ReflectDue.NEVER_LOADED]
CLOSED_SINCE_HINT = REFLECT_HINTS[ReflectDue.CLOSED_SINCE]
STALE_HINT = REFLECT_HINTS[ReflectDue.STALE]

pytestmark = pytest.mark.django_db

HOUR = timedelta(hours=1)


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
    record_reflect(owner=user, now=NOW - timedelta(days=RECENT_REFLECT_DAYS, seconds=1))
    record_reflect(owner=user, now=NOW - timedelta(days=RECENT_REFLECT_DAYS))
    record_reflect(owner=other_user, now=NOW - timedelta(days=30))
    record_reflect(owner=user, now=NOW)
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
