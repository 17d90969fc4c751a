"""The Reflect Preview: /dashboard/preview/ and the sidebar of the memory list."""

from datetime import timedelta

import pytest
from django.test import override_settings
from django.utils import timezone
from django.utils.html import escape

from dashboard.preview import Preview, build_preview
from memories.models import ReflectCall
from memories.payload_entries import ReflectPayload
from memories.services import close, record_reflect, reflect
from tests.dashboard.conftest import htmx

pytestmark = pytest.mark.django_db

URL = "/dashboard/preview/"


def sidebar(html):
    return html.split('id="reflect-preview"', 1)[1]


@override_settings(CATALOG_WINDOW_DAYS=45)
def test_preview_shows_core_in_full_catalog_lines_omitted_counts_and_closings(
    logged_in, user, make_memory
):
    stale = timezone.now() - timedelta(days=100)
    core = make_memory(category="identity", core=True, content="I am the core, in full.")
    line = make_memory(category="error", gist="Do not guess dates", salience="high")
    make_memory(category="episodic", updated_at=stale, salience="low")
    make_memory(category="episodic", updated_at=stale, salience="low")
    close(owner=user, reflection="We talked about gardens.", conversation_title="Gardens")

    html = sidebar(logged_in.get(URL).text)

    assert "I am the core, in full." in html
    # Coloured by category like the cards, and linked to the memory.
    assert (
        f'class="preview-block cat-identity" href="/dashboard/memories/{core.pk}/" '
        f'data-memory-id="{core.pk}"'
    ) in html
    assert (
        f'class="preview-line cat-error" href="/dashboard/memories/{line.pk}/" '
        f'data-memory-id="{line.pk}"'
    ) in html
    heading, expected_line = reflect(owner=user).payload["catalog"]["error"]
    assert f'<li class="preview-month"><code>{escape(heading)}</code></li>' in html
    assert f"<code>{escape(expected_line)}</code>" in html
    episodic_row = html.split('<tr class="cat-episodic">', 1)[1].split("</tr>", 1)[0]
    assert episodic_row.endswith("episodic</th><td>2</td><td>0</td>")
    assert "We talked about gardens." in html
    assert "Gardens" in html


def test_catalog_note_under_the_catalog_is_the_payloads_and_quiet_when_nothing_is_left_out(
    logged_in, user, make_memory
):
    make_memory(category="error", gist="Do not guess dates", salience="high")

    html = sidebar(logged_in.get(URL).text)

    note = html.split('<p class="small muted catalog-note">', 1)[1].split("</p>", 1)[0]
    assert note == escape(reflect(owner=user).payload["catalog_note"])
    assert note.startswith("Every memory is listed")
    assert "0 memories" not in html


def test_raw_view_is_exactly_the_text_reflect_sends_escaped(logged_in, user, make_memory):
    make_memory(core=True, content='Quotes " and <b>tags</b> & ampersands')

    html = logged_in.get(URL).text
    raw = html.split('<pre class="raw-json" tabindex="0">', 1)[1].split("</pre>", 1)[0]

    assert raw == escape(reflect(owner=user).text)


def test_size_in_kb_and_tokens_against_the_budget(logged_in, user, make_memory):
    make_memory(core=True)
    payload = reflect(owner=user)

    html = logged_in.get(URL).text

    assert f'<strong id="preview-tokens">{payload.tokens}</strong> of 8000 tokens' in html
    assert f'<strong id="preview-kb">{payload.kilobytes} KB</strong>' in html


def test_no_warning_style_when_the_payload_is_small(logged_in, make_memory):
    make_memory(core=True)

    html = logged_in.get(URL).text

    assert "is-warning" not in html
    assert "budget-warnings" not in html


def test_warning_style_when_core_alone_passes_half_the_budget(logged_in, make_memory, settings):
    settings.REFLECT_MAX_TOKENS = 1000
    make_memory(core=True, content="word " * 500)

    html = logged_in.get(URL).text

    assert 'class="reflect-preview is-warning"' in html
    assert "Core memories alone take more than half of the budget" in html


@pytest.mark.parametrize(
    ("tokens", "core_tokens", "near_budget", "core_heavy"),
    [
        (6400, 4000, False, False),  # exactly 80 % and exactly half: not yet
        (6401, 100, True, False),
        (4500, 4001, False, True),
        (9000, 9000, True, True),  # core alone over the budget: sent as is, warned
    ],
)
def test_warning_thresholds_are_past_80_percent_and_core_past_half(
    tokens, core_tokens, near_budget, core_heavy
):
    sent = ReflectPayload(
        payload={},
        text="",
        tokens=tokens,
        bytes=tokens * 4,
        max_tokens=8000,
        core_tokens=core_tokens,
        included=[],
        cut=[],
    )

    preview = Preview(reflect=sent, categories=[], core_overflow=[], cut_lines=[])

    assert (preview.near_budget, preview.core_heavy) == (near_budget, core_heavy)
    assert preview.warn == (near_budget or core_heavy)


def test_lines_the_budget_cut_are_listed_and_marked_on_their_cards(
    logged_in, make_memory, settings
):
    settings.REFLECT_MAX_TOKENS = 500
    made = [make_memory(gist=f"Catalog line number {i} " + "padding " * 10) for i in range(30)]

    response = logged_in.get("/dashboard/")

    preview = response.context["preview"]
    assert preview.cut, "the budget should have cut some lines"
    assert "Lines the budget cut" in response.text
    assert "payload uses more than 80%" in response.text
    cut_id = preview.cut[0].id
    card = response.text.split(f'id="memory-{cut_id}"', 1)[1].split("</article>", 1)[0]
    assert "cut by budget" in card
    assert {entry.id for entry in preview.cut} <= {str(m.pk) for m in made}
    assert preview.reflect.cut_count == len(made) - len(preview.included_ids)


def test_cut_lines_reflect_never_read_are_counted_and_still_marked(
    logged_in, make_memory, settings
):
    settings.REFLECT_MAX_TOKENS = 500  # room for at most 113 catalog lines
    for i in range(130):
        make_memory(gist=f"Line {i}")

    response = logged_in.get("/dashboard/")

    preview = response.context["preview"]
    assert preview.reflect.cut_count > len(preview.cut)
    assert f"and {preview.cut_not_shown} more" in response.text
    for memory in response.context["page"]:
        card = response.text.split(f'id="memory-{memory.pk}"', 1)[1].split("</article>", 1)[0]
        assert ("cut by budget" in card) == (str(memory.pk) not in preview.included_ids)


def test_preview_groups_exactly_the_lines_of_the_payload(user, make_memory):
    for index, category in enumerate(["identity", "error", "error", "episodic", "event"]):
        make_memory(category=category, gist=f"gist {index}")
    payload = reflect(owner=user)

    preview = build_preview(payload)

    for group in preview.categories:
        catalog = payload.payload["catalog"].get(group.category, [])
        sent = [item for line in group.lines for item in (line.heading, line.text) if item]
        assert sent == catalog
        core = payload.payload["core_memories"].get(group.category, [])
        assert [block.item for block in group.core] == core


def test_htmx_refresh_swaps_counts_and_preview_out_of_band(logged_in, make_memory):
    make_memory(core=True, content="Fresh core")

    response = logged_in.get(URL, **htmx())

    assert "<html" not in response.text
    assert response.text.count('hx-swap-oob="true"') == 2
    assert "Fresh core" in response.text


def test_preview_page_without_htmx_is_a_whole_page(logged_in):
    response = logged_in.get(URL)

    assert response.status_code == 200
    assert "<html" in response.text


def test_preview_shows_only_the_users_own_memories(logged_in, other_user, make_memory):
    make_memory(owner=other_user, core=True, content="Bob's core")

    assert "Bob&#x27;s core" not in logged_in.get(URL).text


@pytest.mark.parametrize("count", [2, 40])
def test_preview_query_count_does_not_grow_with_the_store(
    logged_in, make_memory, django_assert_max_num_queries, count
):
    stale = timezone.now() - timedelta(days=100)
    for index in range(count):
        make_memory(core=index % 4 == 0, updated_at=stale if index % 3 else timezone.now())

    # session, user, state counts, reflect's reads (the kept counts, those touched
    # lately, core, core text, closings, catalog, short ids) and the reflect history
    with django_assert_max_num_queries(11):
        logged_in.get(URL, **htmx())


def test_preview_requires_login(client):
    assert client.get(URL).status_code == 302


def test_preview_says_when_claude_last_loaded_the_memory_and_through_which_client(logged_in, user):
    now = timezone.now()
    record_reflect(owner=user, client_name="Claude", now=now - timedelta(days=9))
    record_reflect(owner=user, client_name="Claude", now=now - timedelta(hours=3, minutes=5))

    html = sidebar(logged_in.get(URL).text)

    signal = html.split('id="loaded-signal">', 1)[1].split("</p>", 1)[0]
    assert signal.startswith("Claude last loaded your memory 3\xa0hours ago (Claude) <span")
    assert "1 time in the last 7 days" in signal


def test_preview_says_when_claude_has_never_loaded_the_memory(logged_in):
    html = sidebar(logged_in.get(URL).text)
    assert "Claude has not loaded your memory yet" in html


def test_showing_the_preview_is_not_claude_loading_the_memory(logged_in, make_memory):
    make_memory(core=True)
    logged_in.get(URL)
    logged_in.get("/dashboard/")
    assert not ReflectCall.objects.exists()


def test_core_memories_that_do_not_fit_in_full_are_shown_as_the_lines_sent(
    logged_in, user, make_memory, settings
):
    settings.REFLECT_MAX_TOKENS = 2000
    for i in range(40):
        make_memory(core=True, gist=f"Core gist {i} " + "g" * 150, content="c" * 3000)

    html = sidebar(logged_in.get(URL).text)

    payload = reflect(owner=user).payload
    assert payload["core_overflow"] and payload["core_omitted"]
    assert "Did not fit in full" in html
    for line in payload["core_overflow"]:
        assert f"<code>{escape(line)}</code>" in html
    assert f"and {payload['core_omitted']} more left out" in html
    assert "core memories do not fit in full" in html  # the warning


def test_lines_the_budget_cut_show_their_shortest_unique_ids_too(logged_in, make_memory, settings):
    import uuid

    settings.REFLECT_MAX_TOKENS = 500
    # Few enough that reflect reads the cut line (it reads lines while they could fit).
    for i in range(21):
        make_memory(gist=f"Kept line {i} " + "k" * 40, salience="high")
    cut = make_memory(id=uuid.UUID("a002ab76-58b6-4e9c-ba6d-7ec35cb2e2be"), salience="low")
    make_memory(
        id=uuid.UUID("a002ab76-58c0-4e9c-ba6d-7ec35cb2e2be"),
        salience="low",
        updated_at=timezone.now() - timedelta(days=300),  # outside the window
    )

    response = logged_in.get(URL)

    assert cut.pk in {uuid.UUID(entry.id) for entry in response.context["preview"].cut}
    assert f"<code>[a002ab76-58b] {cut.gist}</code>" in response.text


def test_counts_agree_with_their_nouns(logged_in, make_memory):
    def tier2_count() -> str:
        html = logged_in.get("/dashboard/").text
        heading = html.split('<h3 id="tier2-heading">', 1)[1].split("</h3>", 1)[0]
        return heading.split('<span class="count">', 1)[1].split("</span>", 1)[0]

    make_memory(gist="One line")
    assert tier2_count() == "1 line"
    make_memory(gist="Another line")
    assert tier2_count() == "2 lines"
