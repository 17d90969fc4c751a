"""Retries store once (issue 31): a create that repeats one the account stored within
TAPROOT_RETRY_WINDOW_MINUTES returns it and writes nothing; an update that changes
nothing writes no revision."""

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from mcp_bridge.handlers import close, remember
from memories.models import Closing, Memory, Revision

pytestmark = pytest.mark.django_db

FIELDS = {"category": "episodic", "content": "Fed the cat at seven.", "gist": "Cat fed at 7"}


def test_a_repeated_remember_returns_the_first_memory(user: Any) -> None:
    first = remember(owner=user, **FIELDS)
    again = remember(owner=user, **FIELDS)
    assert again["memory_id"] == first["memory_id"]
    assert again["already_stored"] is True
    assert "already_stored" not in first
    assert Memory.objects.filter(owner=user).count() == 1


def test_a_remember_differing_in_any_field_is_stored(user: Any) -> None:
    first = remember(owner=user, **FIELDS)
    tagged = remember(owner=user, **FIELDS, tags=["cat"])
    core = remember(owner=user, **FIELDS, core=True)
    assert len({first["memory_id"], tagged["memory_id"], core["memory_id"]}) == 3
    assert Memory.objects.filter(owner=user).count() == 3


def test_the_same_fields_after_the_window_are_a_new_memory(user: Any, settings: Any) -> None:
    settings.TAPROOT_RETRY_WINDOW_MINUTES = 10
    now = timezone.now()
    first = remember(owner=user, now=now - timedelta(minutes=11), **FIELDS)
    again = remember(owner=user, now=now, **FIELDS)
    assert again["memory_id"] != first["memory_id"]
    assert "already_stored" not in again


def test_a_window_of_zero_turns_retries_off(user: Any, settings: Any) -> None:
    settings.TAPROOT_RETRY_WINDOW_MINUTES = 0
    assert (
        remember(owner=user, **FIELDS)["memory_id"] != remember(owner=user, **FIELDS)["memory_id"]
    )


def test_another_accounts_identical_memory_is_not_a_retry(user: Any, other_user: Any) -> None:
    first = remember(owner=user, **FIELDS)
    theirs = remember(owner=other_user, **FIELDS)
    assert theirs["memory_id"] != first["memory_id"]
    assert "already_stored" not in theirs


def test_a_repeated_close_keeps_one_closing(user: Any) -> None:
    first = close(owner=user, reflection="We planned the garden.")
    again = close(owner=user, reflection="We planned the garden.")
    assert again["reflection_id"] == first["reflection_id"]
    assert again["already_stored"] is True
    assert Closing.objects.filter(owner=user).count() == 1


def test_an_update_that_changes_nothing_writes_no_revision(user: Any) -> None:
    memory_id = remember(owner=user, **FIELDS)["memory_id"]
    before = Memory.objects.get(pk=memory_id)
    revisions = Revision.objects.count()
    remember(owner=user, update_id=memory_id, gist=FIELDS["gist"], category="episodic")
    after = Memory.objects.get(pk=memory_id)
    assert Revision.objects.count() == revisions
    # What it says is unchanged; that it was said again still counts as a touch.
    assert (after.gist, after.content, after.category) == (
        before.gist,
        before.content,
        before.category,
    )
