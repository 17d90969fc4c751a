"""Suggested promotions, demotions and archiving: the rules at their boundaries, dismissals
remembered, and applying through the same services as the tools."""

from datetime import timedelta

import pytest

from memories.errors import SuggestionStale, UnknownMemory
from memories.models import ChangeSource, DismissedSuggestion, Memory, Revision
from memories.services import apply_suggestion, dismiss_suggestion, suggestions
from memories.vocabulary import (
    ARCHIVE_IDLE_DAYS,
    DEMOTE_IDLE_DAYS,
    PROMOTE_MIN_RECALLS,
    PROMOTE_RECALLED_WITHIN_DAYS,
)
from tests.conftest import NOW
from tests.store import unchanged

pytestmark = pytest.mark.django_db

TICK = timedelta(microseconds=1)


def suggested(user, kind: str) -> set[str]:
    group = next(g for g in suggestions(owner=user, now=NOW, limit=50) if g.kind == kind)
    assert group.count == len(group.memories)
    return {m.gist for m in group.memories}


# --- promote ------------------------------------------------------------------------


def test_promote_needs_enough_recalls_and_a_recent_one(user, make_memory):
    within = NOW - timedelta(days=PROMOTE_RECALLED_WITHIN_DAYS)
    old = NOW - timedelta(days=300)
    for gist, count, last, core in [
        ("enough, at the edge of the window", PROMOTE_MIN_RECALLS, within, False),
        ("one recall short", PROMOTE_MIN_RECALLS - 1, NOW, False),
        ("last recall just too old", 50, within - TICK, False),
        ("already core", 50, NOW, True),
    ]:
        make_memory(
            gist=gist, retrieval_count=count, last_retrieved=last, updated_at=old, core=core
        )
    make_memory(
        gist="archived",
        retrieval_count=9,
        last_retrieved=NOW,
        archived_at=NOW,
        archive_reason="x",
    )
    assert suggested(user, "promote") == {"enough, at the edge of the window"}


# --- demote -------------------------------------------------------------------------


def test_demote_needs_a_core_memory_neither_recalled_nor_updated_for_the_period(user, make_memory):
    edge = NOW - timedelta(days=DEMOTE_IDLE_DAYS)
    make_memory(gist="touched exactly at the edge", core=True, updated_at=edge)
    make_memory(gist="idle just past the edge", core=True, updated_at=edge - TICK)
    make_memory(
        gist="old but recalled lately",
        core=True,
        updated_at=edge - timedelta(days=100),
        last_retrieved=NOW - timedelta(days=3),
        retrieval_count=1,
    )
    make_memory(gist="not core", updated_at=edge - timedelta(days=100))
    assert suggested(user, "demote") == {"idle just past the edge"}


# --- archive ------------------------------------------------------------------------


def test_archive_needs_low_salience_no_recall_and_a_long_idle(user, make_memory):
    edge = NOW - timedelta(days=ARCHIVE_IDLE_DAYS)
    long_ago = edge - timedelta(days=1)
    make_memory(gist="idle just past the edge", salience="low", updated_at=edge - TICK)
    make_memory(gist="touched exactly at the edge", salience="low", updated_at=edge)
    make_memory(gist="medium salience", salience="medium", updated_at=long_ago)
    make_memory(
        gist="recalled once",
        salience="low",
        updated_at=long_ago,
        retrieval_count=1,
        last_retrieved=long_ago,
    )
    make_memory(gist="core", salience="low", updated_at=long_ago, core=True)
    assert suggested(user, "archive") == {"idle just past the edge"}


# --- all of them --------------------------------------------------------------------


def test_another_users_memories_are_never_suggested(user, other_user, make_memory):
    make_memory(owner=other_user, salience="low", updated_at=NOW - timedelta(days=999))
    assert all(group.count == 0 for group in suggestions(owner=user, now=NOW))


def test_counts_cover_every_memory_a_rule_picks_beyond_those_listed(user, make_memory):
    for i in range(8):
        make_memory(gist=f"old {i}", salience="low", updated_at=NOW - timedelta(days=400 + i))
    archive = next(g for g in suggestions(owner=user, now=NOW) if g.kind == "archive")
    assert archive.count == 8
    # The longest idle first.
    assert [m.gist for m in archive.memories] == [f"old {i}" for i in (7, 6, 5, 4, 3)]


def test_counts_leave_out_dismissed_memories_listed_or_not(user, other_user, make_memory):
    old = [
        make_memory(gist=f"old {i}", salience="low", updated_at=NOW - timedelta(days=400 + i))
        for i in range(9)
    ]
    # Dismissed: one that would be listed, one that would only be counted, and one for
    # another kind (still suggested for archiving).
    dismiss_suggestion(owner=user, memory_id=old[8].pk, kind="archive", now=NOW)
    dismiss_suggestion(owner=user, memory_id=old[0].pk, kind="archive", now=NOW)
    dismiss_suggestion(owner=user, memory_id=old[1].pk, kind="promote", now=NOW)
    # Another owner's dismissal of the same kind changes nothing here.
    theirs = make_memory(owner=other_user, salience="low", updated_at=NOW - timedelta(days=400))
    dismiss_suggestion(owner=other_user, memory_id=theirs.pk, kind="archive", now=NOW)
    archive = next(g for g in suggestions(owner=user, now=NOW) if g.kind == "archive")
    assert archive.count == 7
    assert [m.gist for m in archive.memories] == [f"old {i}" for i in (7, 6, 5, 4, 3)]
    assert suggested(user, "archive") == {f"old {i}" for i in range(1, 8)}


def test_a_dismissed_suggestion_is_not_made_again_but_others_for_the_memory_are(user, make_memory):
    memory = make_memory(
        gist="both",
        core=True,
        salience="low",
        updated_at=NOW - timedelta(days=400),
    )
    dismiss_suggestion(owner=user, memory_id=memory.pk, kind="demote", now=NOW)
    dismiss_suggestion(owner=user, memory_id=memory.pk, kind="demote", now=NOW)  # once is kept
    assert DismissedSuggestion.objects.count() == 1
    assert suggested(user, "demote") == set()
    Memory.objects.filter(pk=memory.pk).update(core=False)
    assert suggested(user, "archive") == {"both"}


def test_dismissing_needs_the_owners_memory(user, other_user, make_memory):
    theirs = make_memory(owner=other_user)
    make_memory()
    with unchanged(), pytest.raises(UnknownMemory):
        dismiss_suggestion(owner=user, memory_id=theirs.pk, kind="demote", now=NOW)
    assert not DismissedSuggestion.objects.exists()


def test_applying_a_promotion_is_a_promote_with_its_revision(user, make_memory):
    memory = make_memory(retrieval_count=6, last_retrieved=NOW, updated_at=NOW - timedelta(days=9))
    promoted = apply_suggestion(owner=user, memory_id=memory.pk, kind="promote", now=NOW)
    stored = Memory.objects.get(pk=memory.pk)
    assert (promoted.core, stored.core, stored.updated_at) == (True, True, NOW)
    revision = Revision.objects.get(memory=memory)
    assert (revision.action, revision.source) == ("promote", ChangeSource.DASHBOARD)
    assert suggested(user, "promote") == set()


def test_applying_a_demotion_and_an_archive(user, make_memory):
    idle_core = make_memory(core=True, updated_at=NOW - timedelta(days=200))
    stale = make_memory(salience="low", updated_at=NOW - timedelta(days=400))
    apply_suggestion(owner=user, memory_id=idle_core.pk, kind="demote", now=NOW)
    apply_suggestion(owner=user, memory_id=stale.pk, kind="archive", now=NOW)
    assert Memory.objects.get(pk=idle_core.pk).core is False
    archived = Memory.objects.get(pk=stale.pk)
    assert archived.archived_at == NOW
    assert "Suggested" in archived.archive_reason
    assert all(group.count == 0 for group in suggestions(owner=user, now=NOW))


# --- applying re-checks the rule ------------------------------------------------------


def test_a_promotion_nobody_suggested_is_refused_and_changes_nothing(user, make_memory):
    never_recalled = make_memory(gist="Recalled once, long ago", retrieval_count=1)
    with unchanged(), pytest.raises(SuggestionStale) as refused:
        apply_suggestion(owner=user, memory_id=never_recalled.pk, kind="promote", now=NOW)
    assert (refused.value.memory_id, refused.value.kind, refused.value.dismissed) == (
        never_recalled.pk,
        "promote",
        False,
    )


def test_archiving_a_core_high_salience_memory_is_refused_and_changes_nothing(user, make_memory):
    # Old and never recalled, as the archive rule wants; but core and high salience.
    precious = make_memory(core=True, salience="high", updated_at=NOW - timedelta(days=400))
    with unchanged(), pytest.raises(SuggestionStale) as refused:
        apply_suggestion(owner=user, memory_id=precious.pk, kind="archive", now=NOW)
    assert refused.value.dismissed is False


def test_a_dismissed_suggestion_cannot_be_applied(user, make_memory):
    idle_core = make_memory(core=True, updated_at=NOW - timedelta(days=200))
    dismiss_suggestion(owner=user, memory_id=idle_core.pk, kind="demote", now=NOW)
    with unchanged(), pytest.raises(SuggestionStale) as refused:
        apply_suggestion(owner=user, memory_id=idle_core.pk, kind="demote", now=NOW)
    assert refused.value.dismissed is True


def test_a_suggestion_whose_memory_changed_since_it_was_listed_is_refused(user, make_memory):
    idle_core = make_memory(core=True, updated_at=NOW - timedelta(days=200))
    assert suggested(user, "demote") == {idle_core.gist}
    # Recalled since the list was drawn: no longer idle.
    Memory.objects.filter(pk=idle_core.pk).update(
        last_retrieved=NOW - timedelta(days=1), last_touched_at=NOW - timedelta(days=1)
    )
    with unchanged(), pytest.raises(SuggestionStale):
        apply_suggestion(owner=user, memory_id=idle_core.pk, kind="demote", now=NOW)
