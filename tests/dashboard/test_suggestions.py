"""The Suggestions panel: what the recall history points to, applied through the services
or dismissed for good."""

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from memories.models import ChangeSource, DismissedSuggestion, Memory, Revision
from tests.dashboard.conftest import XSS, htmx
from tests.store import stored, unchanged

pytestmark = pytest.mark.django_db


def panel(html: str) -> str:
    return html.split('<section id="suggestions"', 1)[1].split("</section>", 1)[0]


def apply_url(memory, kind: str) -> str:
    return f"/dashboard/suggestions/{memory.pk}/{kind}/apply/"


def dismiss_url(memory, kind: str) -> str:
    return f"/dashboard/suggestions/{memory.pk}/{kind}/dismiss/"


@pytest.fixture
def often_recalled(make_memory):
    now = timezone.now()
    return make_memory(
        gist="Asked about the garden again",
        retrieval_count=7,
        last_retrieved=now - timedelta(days=1),
        updated_at=now - timedelta(days=30),
    )


@pytest.fixture
def idle_core(make_memory):
    return make_memory(
        gist="An old core memory", core=True, updated_at=timezone.now() - timedelta(days=200)
    )


def test_the_panel_lists_each_kind_with_its_reason_short_ids_and_buttons(
    logged_in, often_recalled, idle_core
):
    html = panel(logged_in.get("/dashboard/").text)

    assert "hidden" not in html.split(">", 1)[0]
    assert "Promote to core" in html and "Demote from core" in html
    assert "Recalled at least 5 times" in html
    assert f"<code>{str(often_recalled.pk)[:8]}</code> Asked about the garden again" in html
    assert f'action="{apply_url(often_recalled, "promote")}"' in html
    assert f'action="{dismiss_url(idle_core, "demote")}"' in html
    assert "Archive <span" not in html  # no archive suggestion: no such group


def test_the_panel_is_hidden_when_there_is_nothing_to_suggest(logged_in, make_memory):
    make_memory()
    html = logged_in.get("/dashboard/").text
    assert '<section id="suggestions" class="suggestions-panel" hidden' in html


def test_applying_with_htmx_promotes_and_refreshes_the_panel_counts_and_preview(
    logged_in, often_recalled
):
    response = logged_in.post(apply_url(often_recalled, "promote"), **htmx())

    assert response.status_code == 200
    memory = stored(often_recalled)
    assert memory.core is True
    revision = Revision.objects.get(memory=memory)
    assert (revision.action, revision.source) == ("promote", ChangeSource.DASHBOARD)
    assert "moved into the core tier" in response.text
    assert often_recalled.gist not in panel(response.text)
    assert response.text.count('hx-swap-oob="true"') == 2  # the counts and the preview
    assert json.loads(response["HX-Trigger"]) == {
        "taproot:memory-changed": {"id": str(often_recalled.pk)}
    }


def test_applying_without_htmx_redirects_back_with_a_message(logged_in, idle_core):
    response = logged_in.post(apply_url(idle_core, "demote"), follow=True)

    assert response.redirect_chain == [("/dashboard/", 302)]
    assert stored(idle_core).core is False
    assert "moved out of the core tier" in response.text


def test_applying_an_archive_suggestion_archives_with_a_reason(logged_in, make_memory):
    stale = make_memory(salience="low", updated_at=timezone.now() - timedelta(days=400))

    logged_in.post(apply_url(stale, "archive"), **htmx())

    archived = stored(stale)
    assert archived.archived_at is not None
    assert archived.archive_reason.startswith("Suggested")


def test_a_dismissal_is_remembered(logged_in, user, idle_core):
    response = logged_in.post(dismiss_url(idle_core, "demote"), **htmx())

    assert response.status_code == 200
    assert "will not be suggested again" in response.text
    assert stored(idle_core).core is True  # nothing applied
    assert DismissedSuggestion.objects.filter(memory=idle_core, kind="demote").exists()
    assert idle_core.gist not in panel(logged_in.get("/dashboard/").text)


def test_an_unknown_kind_is_404(logged_in, idle_core):
    assert logged_in.post(apply_url(idle_core, "forget"), **htmx()).status_code == 404
    assert logged_in.post(dismiss_url(idle_core, "forget"), **htmx()).status_code == 404
    assert stored(idle_core).core is True


def test_another_users_memory_is_404_and_untouched(logged_in, foreign_memory):
    Memory.objects.filter(pk=foreign_memory.pk).update(core=True)
    for url in (apply_url(foreign_memory, "demote"), dismiss_url(foreign_memory, "demote")):
        assert logged_in.post(url, **htmx()).status_code == 404
    assert stored(foreign_memory).core is True
    assert not DismissedSuggestion.objects.exists()


def test_an_archived_memory_is_no_longer_suggested_for_promotion(logged_in, make_memory):
    gone = make_memory(
        retrieval_count=9,
        last_retrieved=timezone.now(),
        archived_at=timezone.now(),
        archive_reason="gone",
    )

    with unchanged():
        response = logged_in.post(apply_url(gone, "promote"), **htmx())

    assert response.status_code == 409
    said = panel(response.text)
    assert "Nothing was changed: this memory is no longer suggested" in said
    # Said for a person: no tool names, no whole ids.
    assert "taproot_" not in said and str(gone.pk) not in said


def test_a_promotion_nobody_suggested_is_a_409_with_the_panel_drawn_anew(
    logged_in, make_memory, often_recalled
):
    never_recalled = make_memory(gist="Nobody asked about this")

    with unchanged():
        response = logged_in.post(apply_url(never_recalled, "promote"), **htmx())

    assert response.status_code == 409
    said = panel(response.text)
    assert 'role="alert"' in said
    assert "no longer suggested to move it into the core tier" in said
    # The panel as it stands: the real suggestion is still offered, the forged one is not.
    assert f'action="{apply_url(often_recalled, "promote")}"' in said
    assert never_recalled.gist not in said
    assert response.text.count('hx-swap-oob="true"') == 2  # the counts and the preview


def test_archiving_a_core_high_salience_memory_is_a_409_and_changes_nothing(logged_in, make_memory):
    precious = make_memory(
        core=True, salience="high", updated_at=timezone.now() - timedelta(days=400)
    )

    with unchanged():
        response = logged_in.post(apply_url(precious, "archive"), **htmx())

    assert response.status_code == 409
    assert "no longer suggested to archive it" in panel(response.text)


def test_a_dismissed_suggestion_is_a_409_and_changes_nothing(logged_in, idle_core):
    logged_in.post(dismiss_url(idle_core, "demote"), **htmx())

    with unchanged():
        response = logged_in.post(apply_url(idle_core, "demote"), **htmx())

    assert response.status_code == 409
    said = panel(response.text)
    assert "the suggestion to move it out of the core tier was dismissed" in said
    assert f'id="suggestion-demote-{idle_core.pk}"' not in said  # not offered again


def test_a_stale_suggestion_without_htmx_redirects_back_with_the_reason(logged_in, make_memory):
    never_recalled = make_memory(gist="Nobody asked about this")

    with unchanged():
        response = logged_in.post(apply_url(never_recalled, "promote"), follow=True)

    assert response.redirect_chain == [("/dashboard/", 302)]
    assert "no longer suggested to move it into the core tier" in response.text


def test_suggested_gists_are_shown_as_text(logged_in, make_memory):
    make_memory(gist=XSS, salience="low", updated_at=timezone.now() - timedelta(days=400))
    html = panel(logged_in.get("/dashboard/").text)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<script>alert(1)" not in html
