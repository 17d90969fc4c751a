from datetime import timedelta

import pytest
from django.test import override_settings

from mcp_bridge.handlers import promote
from memories.errors import DomainError, InvalidInput
from memories.models import ChangeSource, Revision
from memories.services import edit_gist, reflect, set_curation
from tests.conftest import NOW
from tests.store import unchanged

pytestmark = pytest.mark.django_db

LATER = NOW + timedelta(days=1)


def test_promote_sets_core_and_salience_and_replies_with_the_spec_shape(user, make_memory):
    memory = make_memory(salience="low")
    reply = promote(owner=user, memory_id=str(memory.pk), core=True, salience="high", now=LATER)
    assert reply == {"status": "ok", "memory_id": str(memory.pk), "core": True, "salience": "high"}
    memory.refresh_from_db()
    assert (memory.core, memory.salience) == (True, "high")


def test_promote_bumps_updated_at_and_last_touch(user, make_memory):
    memory = make_memory()
    promote(owner=user, memory_id=memory.pk, core=True, now=LATER)
    memory.refresh_from_db()
    assert memory.updated_at == LATER
    assert memory.last_touched_at == LATER
    assert memory.created_at == NOW


def test_promote_keeps_a_revision_from_the_tool(user, make_memory):
    memory = make_memory(salience="medium")
    promote(owner=user, memory_id=memory.pk, salience="high", now=LATER)
    revision = Revision.objects.get(memory=memory)
    assert revision.source == ChangeSource.TOOL
    assert revision.changed_fields == ["salience"]
    assert (revision.before["salience"], revision.after["salience"]) == ("medium", "high")
    assert revision.created_at == LATER


def test_promote_changes_only_what_is_given(user, make_memory):
    memory = make_memory(salience="low", core=True)
    promote(owner=user, memory_id=memory.pk, salience="high", now=LATER)
    memory.refresh_from_db()
    assert (memory.core, memory.salience) == (True, "high")
    promote(owner=user, memory_id=memory.pk, core=False, now=LATER)
    memory.refresh_from_db()
    assert (memory.core, memory.salience) == (False, "high")


def test_promote_coerces_numeric_salience_with_a_warning(user, make_memory):
    memory = make_memory()
    reply = promote(owner=user, memory_id=memory.pk, salience="3", now=LATER)
    assert reply["salience"] == "high"
    assert reply["warnings"]


@pytest.mark.parametrize(
    "arguments",
    [{}, {"salience": "urgent"}, {"core": "maybe"}, {"core": True, "salience": "0"}],
)
def test_promote_refuses_bad_or_missing_values_and_changes_nothing(user, make_memory, arguments):
    memory = make_memory()
    with unchanged(), pytest.raises(InvalidInput):
        promote(owner=user, memory_id=memory.pk, now=LATER, **arguments)


def test_promote_refuses_an_archived_memory(user, make_memory):
    memory = make_memory(archived_at=NOW, archive_reason="old")
    with unchanged(), pytest.raises(InvalidInput) as refused:
        promote(owner=user, memory_id=memory.pk, core=True, now=LATER)
    assert "unarchive" in refused.value.message


def test_promote_refuses_an_unknown_id(user):
    with unchanged(), pytest.raises(InvalidInput):
        promote(owner=user, memory_id="8c1f5ee2-7d0a-4b7e-9a7e-0d51a0f0a001", core=True)


def test_promote_without_a_memory_id_says_it_is_required(user):
    with unchanged(), pytest.raises(InvalidInput) as refused:
        promote(owner=user, memory_id=None, core=True)
    assert refused.value.message.startswith("memory_id is required: the id of one of your")


def test_promoted_memory_moves_into_core(user, make_memory):
    memory = make_memory(category="identity", updated_at=NOW - timedelta(days=90))
    promote(owner=user, memory_id=memory.pk, core=True, now=LATER)
    payload = reflect(owner=user, now=LATER).payload
    assert payload["core_memories"]["identity"][0]["id"] == str(memory.pk)[:8]


# --- the person's edit (dashboard, admin) ---------------------------------------------


def test_set_curation_keeps_updated_at_but_keeps_a_revision(user, make_memory):
    memory = make_memory(salience="high", core=True)
    returned = set_curation(
        owner=user,
        memory_id=memory.pk,
        salience="low",
        core=False,
        source=ChangeSource.DASHBOARD,
        now=LATER,
    )
    assert (returned.salience, returned.core) == ("low", False)
    memory.refresh_from_db()
    assert (memory.salience, memory.core) == ("low", False)
    assert memory.updated_at == NOW
    assert memory.last_touched_at == NOW
    revision = Revision.objects.get(memory=memory)
    assert revision.source == ChangeSource.DASHBOARD
    assert set(revision.changed_fields) == {"salience", "core"}
    assert revision.created_at == LATER


@override_settings(CATALOG_WINDOW_DAYS=45)
def test_demoting_on_the_dashboard_lets_an_old_memory_leave_the_catalog(user, make_memory):
    memory = make_memory(salience="high", updated_at=NOW - timedelta(days=60))
    assert reflect(owner=user, now=NOW).payload["catalog_count"] == 1
    set_curation(owner=user, memory_id=memory.pk, salience="medium", source=ChangeSource.DASHBOARD)
    payload = reflect(owner=user, now=NOW).payload
    assert payload["catalog_count"] == 0
    assert payload["catalog_omitted"]["episodic"] == 1


def test_set_curation_refuses_bad_values_and_changes_nothing(user, make_memory):
    memory = make_memory()
    # The forms offer only the vocabulary; a value outside it is a programming error.
    with unchanged(), pytest.raises(ValueError):
        set_curation(
            owner=user, memory_id=memory.pk, salience="huge", source=ChangeSource.DASHBOARD
        )


def test_edit_gist_clears_the_autogenerated_flag_keeps_updated_at_and_a_revision(user, make_memory):
    memory = make_memory(gist="Made by the rule", gist_autogenerated=True)
    edit_gist(owner=user, memory_id=memory.pk, gist="  Written by hand ", source=ChangeSource.ADMIN)
    memory.refresh_from_db()
    assert (memory.gist, memory.gist_autogenerated) == ("Written by hand", False)
    assert memory.updated_at == NOW
    revision = Revision.objects.get(memory=memory)
    assert revision.source == ChangeSource.ADMIN
    assert set(revision.changed_fields) == {"gist", "gist_autogenerated"}


@pytest.mark.parametrize("gist", ["", "   ", None, "g" * 301])
def test_edit_gist_refuses_blank_or_long_gists(user, make_memory, gist):
    memory = make_memory()
    with unchanged(), pytest.raises(DomainError):
        edit_gist(owner=user, memory_id=memory.pk, gist=gist, source=ChangeSource.DASHBOARD)
