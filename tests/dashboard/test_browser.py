"""The dashboard in a real headless Chromium against a real server.

Debian's chromium package, driven by Playwright through `executable_path` (Playwright
never downloads a browser here). Run with `--screenshots` to refresh docs/screenshots/.
"""

import os
import re
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from memories.models import ChangeSource, Memory
from memories.services import close, edit_gist, record_reflect
from tests.conftest import require_tool

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
PASSWORD = "pw-alice-123"  # tests/conftest.py's `user`
SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"

pytestmark = [
    pytest.mark.browser,
    pytest.mark.server,
    pytest.mark.once_per_run,
    pytest.mark.django_db(transaction=True),
]


@pytest.fixture(scope="module")
def browser(live_server_process: Any) -> Iterator[Any]:
    require_tool(CHROMIUM.exists(), f"Chromium is not installed at {CHROMIUM}")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:  # pragma: no cover - the dev extra installs it
        require_tool(False, "Playwright's Python package is not installed")
    # Playwright's sync API keeps an event loop in this thread, which makes Django's
    # async-safety guard refuse the tests' own (synchronous) database work. The server
    # was started above, so the child process does not inherit this.
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as playwright:
            chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
            yield chromium
            chromium.close()
    finally:
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


class Session:
    """One logged-out browser context, with every console error it saw."""

    def __init__(self, browser: Any, base_url: str, **options: Any) -> None:
        self.base_url = base_url
        self.context = browser.new_context(base_url=base_url, **options)
        self.page = self.context.new_page()
        # Script errors and CSP violations land on the console; failed requests are
        # tracked by their responses instead (the console does not name the URL).
        self.errors: list[str] = []
        self.failed: list[tuple[int, str]] = []
        self.page.on("console", self._console)
        self.page.on("pageerror", lambda error: self.errors.append(str(error)))
        self.page.on("response", self._response)

    def _console(self, message: Any) -> None:
        if message.type == "error" and not message.text.startswith("Failed to load resource"):
            self.errors.append(message.text)

    def _response(self, response: Any) -> None:
        if response.status >= 400:
            self.failed.append((response.status, response.url))

    def close(self) -> None:
        self.context.close()
        assert self.errors == [], "the page logged errors (a CSP violation shows up here)"
        assert self.failed == [], "requests failed"

    def log_in(self, next_path: str = "/dashboard/") -> Any:
        page = self.page
        page.goto(next_path)
        page.wait_for_url(re.compile(r"/accounts/login/"))
        page.fill("#id_username", "alice")
        page.fill("#id_password", PASSWORD)
        page.locator("form[action='/accounts/login/'] [type=submit]").click()
        page.wait_for_url(f"{self.base_url}{next_path}")
        return page


@pytest.fixture
def session(browser: Any, live_server_process: Any) -> Iterator[Session]:
    opened = Session(browser, live_server_process.url, viewport={"width": 1280, "height": 900})
    yield opened
    opened.close()


@pytest.fixture
def store(user: Any, make_memory: Any) -> dict[str, Memory]:
    now = timezone.now()
    stale = now - timedelta(days=120)
    return {
        "core": make_memory(
            category="identity",
            gist="Speaks plainly and likes short answers",
            content="Prefers plain words and short answers; long preambles annoy them.",
            salience="high",
            core=True,
        ),
        "tea": make_memory(
            category="relationship",
            gist="Brews green tea every afternoon",
            content="Every afternoon there is green tea, and talk slows down then.",
            tags=["habits"],
        ),
        "bug": make_memory(
            category="error",
            gist="Do not guess the date of the move",
            content="I once guessed the moving date wrong; ask instead.",
            salience="high",
        ),
        "stale": make_memory(
            category="episodic",
            gist="A rainy trip to the coast",
            content="A trip to the coast that was mostly rain.",
            salience="low",
            updated_at=stale,
            gist_autogenerated=True,
        ),
        "thread": make_memory(
            category="active_thread",
            gist="Drafting chapter three of the garden book",
            content="Chapter three is about soil; the draft is half done.",
        ),
    }


def card(page: Any, memory: Memory) -> Any:
    return page.locator(f"#memory-{memory.pk}")


def test_log_in_then_filter_by_two_categories_and_search(session, store):
    from playwright.sync_api import expect

    page = session.log_in()
    cards = page.locator(".memory-card")
    expect(cards).to_have_count(5)

    page.locator("#filters").get_by_label("identity", exact=True).check()
    expect(cards).to_have_count(1)
    page.locator("#filters").get_by_label("relationship", exact=True).check()
    expect(cards).to_have_count(2)
    page.get_by_label("Search").fill("tea")

    expect(cards).to_have_count(1)
    expect(card(page, store["tea"])).to_be_visible()
    expect(page.locator("#list-count")).to_contain_text("1 of 5 shown")
    assert "category=identity" in page.url
    assert "category=relationship" in page.url
    assert "q=tea" in page.url

    page.go_back()  # the URL holds the filters: back shows the list before the search
    expect(cards).to_have_count(2)
    expect(page.locator("#filters").get_by_label("relationship", exact=True)).to_be_checked()


def test_a_category_reads_the_same_on_the_cards_the_filters_and_the_preview(session, store):
    page = session.log_in()
    # As the browser draws them, styles (text-transform) included.
    shown = [
        card(page, store["thread"]).locator(".category").inner_text(),
        page.locator("#filters label.chip.cat-active_thread").inner_text(),
        page.locator("#reflect-preview h4.cat-active_thread").first.inner_text(),
        page.locator("#reflect-preview tr.cat-active_thread th").inner_text(),
    ]

    assert [text.strip().split("\n")[0] for text in shown] == ["active thread"] * 4


def test_salience_change_updates_preview_and_size_without_reload(session, store):
    from playwright.sync_api import expect

    page = session.log_in()
    stale = store["stale"]
    page.evaluate("window.notReloaded = true")
    # Tokens and bytes: a line one character longer may leave the tokens equal.
    size_before = page.locator(".budget-figures").inner_text()
    # No catalog window by default: the old memory is listed, unmarked at its low salience
    # (a line says its salience only when it is high).
    line = page.locator(f"#reflect-preview a.preview-line[data-memory-id='{stale.pk}']")
    expect(line).to_contain_text(stale.gist)
    expect(line).not_to_contain_text("[high]")

    card(page, stale).get_by_label("Salience").select_option("high")

    expect(line).to_contain_text("[high]")
    expect(page.locator(".budget-figures")).not_to_have_text(size_before)
    expect(card(page, stale).locator(".tier-badge")).to_have_text("catalog")
    assert page.evaluate("window.notReloaded") is True
    saved = Memory.objects.get(pk=stale.pk)
    assert saved.salience == "high"
    assert saved.updated_at == stale.updated_at


def test_toggling_core_moves_the_memory_between_the_preview_tiers(session, store):
    from playwright.sync_api import expect

    page = session.log_in()
    thread = store["thread"]
    in_core = page.locator(f"#reflect-preview a.preview-block[data-memory-id='{thread.pk}']")
    in_catalog = page.locator(f"#reflect-preview a.preview-line[data-memory-id='{thread.pk}']")
    expect(in_catalog).to_be_visible()

    card(page, thread).get_by_label("Core").check()

    expect(in_core).to_be_visible()
    expect(in_core).to_contain_text("Chapter three is about soil")
    expect(in_catalog).to_have_count(0)
    expect(card(page, thread).locator(".tier-badge")).to_have_text("core")

    card(page, thread).get_by_label("Core").uncheck()

    expect(in_catalog).to_be_visible()
    expect(in_core).to_have_count(0)
    assert Memory.objects.get(pk=thread.pk).core is False


def test_clicking_a_preview_block_highlights_its_card_or_says_it_is_hidden(session, store):
    from playwright.sync_api import expect

    page = session.log_in()
    core = store["core"]

    page.locator(f"#reflect-preview [data-memory-id='{core.pk}']").click()

    expect(card(page, core)).to_have_class(re.compile(r"\bis-highlighted\b"))
    expect(card(page, core)).to_be_in_viewport()
    expect(card(page, core)).to_be_focused()

    bug = store["bug"]  # a Tier 2 catalog line this time
    page.locator(f"#reflect-preview a.preview-line[data-memory-id='{bug.pk}']").click()

    expect(card(page, bug)).to_have_class(re.compile(r"\bis-highlighted\b"))
    expect(card(page, bug)).to_be_in_viewport()
    expect(card(page, core)).not_to_have_class(re.compile(r"\bis-highlighted\b"))
    assert page.url.endswith("/dashboard/")  # highlighted in the list, not opened

    page.locator("#filters").get_by_label("error", exact=True).check()
    expect(page.locator(".memory-card")).to_have_count(1)
    page.locator(f"#reflect-preview [data-memory-id='{core.pk}']").click()

    expect(page.locator("#preview-status")).to_contain_text("not in the list")
    assert page.url.endswith("/dashboard/?category=error&sort=recent")  # still the list


def test_edit_a_gist_in_place(session, store):
    from playwright.sync_api import expect

    page = session.log_in()
    stale = store["stale"]
    expect(card(page, stale).locator(".auto-badge")).to_be_visible()

    card(page, stale).get_by_role("link", name="Edit gist").click()
    editor = page.locator(f"#gist-input-{stale.pk}")
    expect(editor).to_be_focused()
    editor.fill("Coast trip, washed out by rain")
    card(page, stale).get_by_role("button", name="Save gist").click()

    expect(card(page, stale).locator(".gist")).to_have_text("Coast trip, washed out by rain")
    expect(card(page, stale).locator(".auto-badge")).to_have_count(0)
    saved = Memory.objects.get(pk=stale.pk)
    assert (saved.gist, saved.gist_autogenerated) == ("Coast trip, washed out by rain", False)


def test_an_empty_gist_is_refused_in_place(session, store):
    from playwright.sync_api import expect

    page = session.log_in()
    tea = store["tea"]
    card(page, tea).get_by_role("link", name="Edit gist").click()
    editor = page.locator(f"#gist-input-{tea.pk}")
    # Bypass the browser's own `required` check to reach the server's.
    editor.evaluate("element => element.removeAttribute('required')")
    editor.fill("   ")
    card(page, tea).get_by_role("button", name="Save gist").click()

    expect(card(page, tea).get_by_role("alert")).to_contain_text("cannot be empty")
    assert Memory.objects.get(pk=tea.pk).gist == "Brews green tea every afternoon"
    assert [status for status, _ in session.failed] == [422]
    session.failed.clear()


def test_archive_and_unarchive(session, store):
    from playwright.sync_api import expect

    page = session.log_in()
    bug = store["bug"]
    preview_line = page.locator(f"#reflect-preview [data-memory-id='{bug.pk}']")
    expect(preview_line).to_have_count(1)

    card(page, bug).get_by_role("button", name="Archive").click()

    expect(card(page, bug).locator(".tier-badge")).to_have_text("archived")
    expect(page.locator(f"#archive-{bug.pk}")).to_be_focused()  # keyboard users stay put
    expect(preview_line).to_have_count(0)
    expect(page.locator("#store-counts")).to_contain_text("archived1")

    card(page, bug).get_by_role("button", name="Unarchive").click()

    expect(card(page, bug).locator(".tier-badge")).to_have_text("catalog")
    expect(preview_line).to_have_count(1)
    assert Memory.objects.get(pk=bug.pk).archived_at is None


def test_delete_asks_first(session, store):
    from playwright.sync_api import expect

    page = session.log_in()
    tea = store["tea"]

    card(page, tea).get_by_role("link", name="Delete…").click()
    expect(card(page, tea)).to_contain_text("Delete this memory for good?")
    card(page, tea).get_by_role("link", name="Keep it").click()
    expect(card(page, tea).get_by_role("link", name="Delete…")).to_be_visible()
    assert Memory.objects.filter(pk=tea.pk).exists()

    card(page, tea).get_by_role("link", name="Delete…").click()
    card(page, tea).get_by_role("button", name="Delete for good").click()

    expect(card(page, tea)).to_contain_text("Deleted")
    expect(page.locator("#store-counts")).to_contain_text("live4")
    assert not Memory.objects.filter(pk=tea.pk).exists()


def test_open_a_revision_and_restore_it(session, store, user):
    from playwright.sync_api import expect

    tea = store["tea"]
    edit_gist(owner=user, memory_id=tea.pk, gist="Drinks tea", source=ChangeSource.TOOL)
    page = session.log_in()

    card(page, tea).locator("a.short-id").click()
    page.wait_for_url(f"**/dashboard/memories/{tea.pk}/")
    expect(page.locator("#detail-gist")).to_have_text("Drinks tea")
    revision = page.locator(".revision")
    expect(revision).to_have_count(1)
    expect(revision).to_contain_text("Brews green tea every afternoon")

    # Asking shows what would change, and changes nothing yet.
    revision.get_by_role("button", name="Restore as it was before…").click()
    preview = page.locator("#restore-preview")
    expect(preview).to_contain_text("Restore as it was before this change?")
    expect(preview.locator("tbody tr")).to_have_count(1)
    expect(preview.locator("tbody tr")).to_contain_text("Drinks tea")
    expect(preview.locator("tbody tr")).to_contain_text("Brews green tea every afternoon")
    expect(preview.get_by_role("button", name="Restore 1 field")).to_be_focused()
    assert Memory.objects.get(pk=tea.pk).gist == "Drinks tea"

    preview.get_by_role("link", name="Keep it as it is").click()
    expect(page.locator("#restore-preview")).to_have_count(0)
    expect(page.locator("#detail-gist")).to_have_text("Drinks tea")

    revision.get_by_role("button", name="Restore as it was before…").click()
    page.locator("#restore-preview").get_by_role("button", name="Restore 1 field").click()

    expect(page.locator("#detail-gist")).to_have_text("Brews green tea every afternoon")
    expect(page.locator(".revision")).to_have_count(2)
    expect(page.get_by_role("status")).to_contain_text("Restored")
    assert Memory.objects.get(pk=tea.pk).gist == "Brews green tea every afternoon"


def test_a_restore_confirmed_after_the_memory_changed_shows_the_new_preview(session, store, user):
    from playwright.sync_api import expect

    tea = store["tea"]
    edit_gist(owner=user, memory_id=tea.pk, gist="Drinks tea", source=ChangeSource.TOOL)
    page = session.log_in(f"/dashboard/memories/{tea.pk}/")
    page.locator(".revision").get_by_role("button", name="Restore as it was before…").click()
    preview = page.locator("#restore-preview")
    expect(preview.locator("tbody tr")).to_have_count(1)
    # Claude edits the memory while the question is on the screen.
    edit_gist(owner=user, memory_id=tea.pk, gist="Drinks oolong", source=ChangeSource.TOOL)

    preview.get_by_role("button", name="Restore 1 field").click()

    expect(preview.get_by_role("alert")).to_contain_text("Nothing was restored")
    expect(preview.locator("tbody tr")).to_contain_text("Drinks oolong")
    assert Memory.objects.get(pk=tea.pk).gist == "Drinks oolong"
    assert [status for status, _ in session.failed] == [409]
    session.failed.clear()


def test_beside_the_list_the_preview_collapses_and_stays_collapsed(session, store):
    from playwright.sync_api import expect

    page = session.log_in()
    panel = page.locator("#preview-panel")
    toggle = page.locator("#preview-toggle")
    expect(panel).to_be_visible()
    expect(toggle).to_have_attribute("aria-expanded", "true")
    width_beside = page.locator("#memory-list").bounding_box()["width"]

    toggle.click()

    expect(panel).to_be_hidden()
    expect(toggle).to_have_attribute("aria-expanded", "false")
    # The list takes the room the preview left.
    assert page.locator("#memory-list").bounding_box()["width"] > width_beside + 300

    page.reload()  # remembered in this browser

    expect(panel).to_be_hidden()
    page.locator("#preview-toggle").click()
    expect(panel).to_be_visible()
    expect(page.locator("#preview-toggle")).to_have_attribute("aria-expanded", "true")


def test_on_a_phone_the_preview_opens_full_screen(browser, live_server_process, store):
    from playwright.sync_api import expect

    phone = Session(
        browser, live_server_process.url, viewport={"width": 390, "height": 844}, is_mobile=True
    )
    try:
        page = phone.log_in()
        panel = page.locator("#preview-panel")
        expect(panel).to_be_hidden()

        page.locator("#preview-toggle").click()

        expect(panel).to_be_visible()
        box = panel.bounding_box()
        assert box["width"] == 390 and box["height"] == 844
        page.keyboard.press("Escape")
        expect(panel).to_be_hidden()

        page.locator("#preview-toggle").click()
        page.locator(f"#reflect-preview [data-memory-id='{store['bug'].pk}']").click()
        expect(panel).to_be_hidden()
        expect(card(page, store["bug"])).to_have_class(re.compile(r"\bis-highlighted\b"))
    finally:
        phone.close()


def overlaps(a: dict[str, float], b: dict[str, float]) -> bool:
    return (
        a["x"] < b["x"] + b["width"]
        and b["x"] < a["x"] + a["width"]
        and a["y"] < b["y"] + b["height"]
        and b["y"] < a["y"] + a["height"]
    )


def test_on_a_phone_the_preview_button_covers_none_of_the_filter_buttons(
    browser, live_server_process, store
):
    from playwright.sync_api import expect

    phone = Session(
        browser, live_server_process.url, viewport={"width": 390, "height": 844}, is_mobile=True
    )
    try:
        page = phone.log_in()
        toggle = page.locator("#preview-toggle")
        expect(toggle).to_be_visible()
        apply = page.locator("#filters").get_by_role("button", name="Apply")
        clear = page.locator("#filters").get_by_role("link", name="Clear")
        # Wherever the page is scrolled to show them: at the top, middle or bottom edge.
        for block in ("start", "center", "end", "nearest"):
            clear.evaluate(f"element => element.scrollIntoView({{block: '{block}'}})")
            shown = toggle.bounding_box()
            for control in (apply, clear):
                assert not overlaps(shown, control.bounding_box()), (block, control)
        expect(toggle).to_be_visible()  # still at hand, wherever the page is
        page.get_by_label("Search").fill("tea")
        clear.click()  # Playwright refuses a click another element would take
        page.wait_for_url(f"{phone.base_url}/dashboard/")
        expect(page.get_by_label("Search")).to_have_value("")
    finally:
        phone.close()


def test_on_a_phone_the_memory_page_keeps_its_buttons_button_sized_and_in_order(
    browser, live_server_process, store, user
):
    tea = store["tea"]
    edit_gist(owner=user, memory_id=tea.pk, gist="Drinks tea", source=ChangeSource.TOOL)
    phone = Session(
        browser, live_server_process.url, viewport={"width": 390, "height": 844}, is_mobile=True
    )
    try:
        page = phone.log_in(f"/dashboard/memories/{tea.pk}/")
        edit = page.get_by_role("link", name="Edit gist").bounding_box()
        delete = page.get_by_role("link", name="Delete…").bounding_box()
        revision = page.locator(".revision")
        before = revision.get_by_role("button", name="Restore as it was before").bounding_box()
        after = revision.get_by_role("button", name="Restore as it was after").bounding_box()

        # Edit gist, then Delete…, side by side as on a desktop.
        assert edit["y"] == delete["y"]
        assert edit["x"] + edit["width"] <= delete["x"]
        assert edit["width"] == delete["width"]
        # The restore buttons in reading order: before, then after.
        assert before["y"] + before["height"] <= after["y"]
        for box in (edit, delete, before, after):
            assert box["height"] <= 44, box  # a button, not an 8rem slab

        page.get_by_role("link", name="Edit gist").click()
        page.wait_for_url(f"**/dashboard/memories/{tea.pk}/gist/")
        save = page.get_by_role("button", name="Save gist").bounding_box()
        cancel = page.get_by_role("link", name="Cancel").bounding_box()
        # A form's main choice on top; both full width and button-sized.
        assert save["y"] + save["height"] <= cancel["y"]
        assert save["width"] == cancel["width"] > 300
        assert max(save["height"], cancel["height"]) <= 48
    finally:
        phone.close()


def test_the_suggestions_panel_applies_and_dismisses_in_place(session, store, make_memory):
    from playwright.sync_api import expect

    now = timezone.now()
    recalled = make_memory(
        category="relationship",
        gist="Asks about the allotment every week",
        retrieval_count=8,
        last_retrieved=now - timedelta(days=1),
        updated_at=now - timedelta(days=20),
    )
    idle = make_memory(
        category="identity",
        gist="Used to write in the mornings",
        core=True,
        updated_at=now - timedelta(days=150),
    )
    page = session.log_in()
    page.evaluate("window.notReloaded = true")
    panel = page.locator("#suggestions")
    expect(panel).to_be_visible()
    promote_row = panel.locator(f"#suggestion-promote-{recalled.pk}")
    expect(promote_row).to_contain_text(str(recalled.pk)[:8])
    expect(card(page, recalled).locator(".tier-badge")).to_have_text("catalog")

    promote_row.get_by_role("button", name="Promote").click()

    expect(panel.locator(".suggestion-message")).to_contain_text("moved into the core tier")
    expect(promote_row).to_have_count(0)
    # The card and the preview follow without a reload.
    expect(card(page, recalled).locator(".tier-badge")).to_have_text("core")
    expect(
        page.locator(f"#reflect-preview a.preview-block[data-memory-id='{recalled.pk}']")
    ).to_be_visible()

    demote_row = panel.locator(f"#suggestion-demote-{idle.pk}")
    demote_row.get_by_role("button", name="Dismiss").click()

    expect(panel.locator(".suggestion-message")).to_contain_text("will not be suggested again")
    expect(demote_row).to_have_count(0)
    assert page.evaluate("window.notReloaded") is True
    page.reload()
    expect(page.locator(f"#suggestion-demote-{idle.pk}")).to_have_count(0)
    expect(page.locator("#suggestions")).to_be_hidden()  # nothing left to suggest
    assert Memory.objects.get(pk=recalled.pk).core is True
    assert Memory.objects.get(pk=idle.pk).core is True  # dismissed, not applied


def test_revoke_access_asks_first(session, user):
    from oauth2_provider.models import AccessToken
    from playwright.sync_api import expect

    from tests.dashboard.test_account_pages import make_client_with_tokens

    application = make_client_with_tokens(user, name="Claude")
    page = session.log_in("/dashboard/clients/")
    client = page.locator(f"#client-{application.pk}")

    client.get_by_role("link", name="Revoke access…").click()
    expect(client).to_contain_text("Revoke access for Claude?")
    expect(client.get_by_role("button", name="Revoke access")).to_be_focused()
    assert AccessToken.objects.filter(user=user).exists()
    client.get_by_role("link", name="Keep access").click()
    expect(client.get_by_role("link", name="Revoke access…")).to_be_visible()
    assert AccessToken.objects.filter(user=user).exists()

    client.get_by_role("link", name="Revoke access…").click()
    client.get_by_role("button", name="Revoke access").click()

    expect(page.get_by_role("status")).to_contain_text("Access revoked.")
    assert not AccessToken.objects.filter(user=user).exists()


def test_a_suggestion_that_no_longer_holds_is_refused_in_the_panel(session, store, make_memory):
    from playwright.sync_api import expect

    now = timezone.now()
    recalled = make_memory(
        gist="Asks about the allotment every week",
        retrieval_count=8,
        last_retrieved=now - timedelta(days=1),
        updated_at=now - timedelta(days=20),
    )
    page = session.log_in()
    row = page.locator(f"#suggestion-promote-{recalled.pk}")
    expect(row).to_be_visible()
    # Promoted meanwhile (by Claude, or in another window): the suggestion is spent.
    Memory.objects.filter(pk=recalled.pk).update(core=True)

    row.get_by_role("button", name="Promote").click()

    message = page.locator("#suggestions .suggestion-message")
    expect(message).to_contain_text("Nothing was changed")
    expect(message).to_have_attribute("role", "alert")
    expect(page.locator(f"#suggestion-promote-{recalled.pk}")).to_have_count(0)
    assert Memory.objects.get(pk=recalled.pk).updated_at == recalled.updated_at
    assert [status for status, _ in session.failed] == [409]
    session.failed.clear()


def test_the_preview_says_when_claude_last_loaded_the_memory(session, store, user):
    from playwright.sync_api import expect

    record_reflect(owner=user, client_name="Claude", now=timezone.now() - timedelta(hours=3))
    page = session.log_in()

    expect(page.locator("#loaded-signal")).to_contain_text(
        "Claude last loaded your memory 3\xa0hours ago (Claude) · 1 time in the last 7 days"
    )


def test_screenshots_of_the_main_view(request, browser, live_server_process, user, make_memory):
    """With --screenshots: the memory list and preview, desktop and phone, light and dark."""
    if not request.config.getoption("--screenshots"):
        pytest.skip("pass --screenshots to refresh docs/screenshots/")
    demo_store(user, make_memory)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    sizes = {"desktop": {"width": 1360, "height": 900}, "phone": {"width": 390, "height": 844}}
    for size, viewport in sizes.items():
        for scheme in ("light", "dark"):
            shot = Session(
                browser,
                live_server_process.url,
                viewport=viewport,
                color_scheme=scheme,
                is_mobile=size == "phone",
                device_scale_factor=1 if size == "desktop" else 2,
                reduced_motion="reduce",
            )
            try:
                page = shot.log_in()
                page.screenshot(path=str(SCREENSHOTS / f"dashboard-{size}-{scheme}.png"))
                if size == "phone":
                    page.locator("#preview-toggle").click()
                    page.screenshot(
                        path=str(SCREENSHOTS / f"dashboard-{size}-{scheme}-preview.png")
                    )
            finally:
                shot.close()


def demo_store(user: Any, make_memory: Any) -> None:
    """A small, plausible store for the screenshots."""
    now = timezone.now()
    entries = [
        ("identity", "Speaks plainly; prefers short answers over long preambles", "high", True, 2),
        ("relationship", "Works with Maya on the garden book; she edits, I draft", "high", True, 5),
        (
            "error",
            "Asked twice for the moving date: check the calendar note first",
            "high",
            False,
            1,
        ),
        (
            "active_thread",
            "Chapter three (soil) is half drafted; next: compost section",
            "medium",
            False,
            3,
        ),
        (
            "active_thread",
            "Looking for a second-hand greenhouse under 400 euros",
            "medium",
            False,
            9,
        ),
        ("episodic", "Spring planting day: tomatoes went in a week early", "medium", False, 20),
        ("relationship", "Calls on Sunday evenings are for family, not work", "medium", False, 30),
        # Recalled often lately: suggested for the core tier.
        (
            "relationship",
            "Maya's deadlines: a chapter is due on the first of each month",
            "medium",
            False,
            12,
        ),
        ("episodic", "A rainy trip to the coast in March", "low", False, 80),
        ("identity", "Reads slowly and rereads what matters", "low", False, 120),
    ]
    for category, gist, salience, core, days in entries:
        recalled = gist.startswith("Maya's deadlines")
        make_memory(
            id=uuid.uuid5(uuid.NAMESPACE_URL, f"taproot-demo:{gist}"),  # stable screenshots
            category=category,
            gist=gist,
            content=gist + ". " + "More detail, written by Claude during the conversation.",
            salience=salience,
            core=core,
            tags=[category.split("_")[0], "garden"]
            if "garden" in gist or "Chapter" in gist
            else [],
            retrieval_count=6 if recalled else days % 7,
            last_retrieved=now - timedelta(days=2) if recalled else None,
            updated_at=now - timedelta(days=days),
            gist_autogenerated=days == 80,
        )
    record_reflect(owner=user, client_name="Claude", now=now - timedelta(hours=3))
    close(
        owner=user,
        reflection="We planned the compost section and agreed to keep chapters short.",
        conversation_title="Garden book, chapter three",
        conversation_url="https://claude.ai/chat/example",
    )
