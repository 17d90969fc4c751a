"""The look: category colours, contrast in light and dark mode, labelled form controls."""

import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from mcp_bridge.handlers import remember
from memories.models import ChangeSource
from memories.services import archive, close
from memories.vocabulary import CATEGORY_ORDER
from tests.dashboard.conftest import htmx
from tests.page_text import page_text

STATIC = Path(__file__).resolve().parents[2] / "static" / "css"
BASE_CSS = (STATIC / "taproot.css").read_text()
DASHBOARD_CSS = (STATIC / "dashboard.css").read_text()

# ../shared/SPEC.md §10: the same on the cards and in the preview.
CATEGORY_COLOURS = {
    "identity": "#818cf8",
    "relationship": "#f472b6",
    "active_thread": "#2dd4bf",
    "error": "#f87171",
    "episodic": "#fbbf24",
}

# Foreground on background, as the stylesheets pair them for text.
TEXT_PAIRS = [
    ("text", "bg"),
    ("text", "surface"),
    ("text", "surface-2"),
    ("text", "accent-soft"),
    ("text", "success-soft"),
    ("text", "warning-soft"),
    ("muted", "bg"),
    ("muted", "surface"),
    ("muted", "surface-2"),
    ("accent", "bg"),
    ("accent", "surface"),
    ("accent", "surface-2"),
    ("accent", "accent-soft"),
    ("on-accent", "accent"),
    ("danger", "surface"),
    ("danger", "danger-soft"),
    ("success", "success-soft"),
    ("warning", "surface"),
    ("warning", "warning-soft"),
]
WCAG_AA_TEXT = 4.5
WCAG_AA_FOCUS = 3.0  # a focus ring is a non-text indicator


def colours(css: str) -> dict[str, str]:
    return dict(re.findall(r"--([a-z0-9_-]+):\s*(#[0-9a-fA-F]{6})\s*;", css))


def schemes() -> dict[str, dict[str, str]]:
    light_css, dark_css = BASE_CSS.split("@media (prefers-color-scheme: dark)", 1)
    light = colours(light_css)
    dark_root = re.search(r":root\s*\{(.*?)\}", dark_css, flags=re.DOTALL)
    assert dark_root, "the dark scheme redefines the colours on :root"
    return {"light": light, "dark": light | colours(dark_root.group(1))}


def luminance(hex_colour: str) -> float:
    channels = [int(hex_colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def contrast(first: str, second: str) -> float:
    high, low = sorted([luminance(first), luminance(second)], reverse=True)
    return (high + 0.05) / (low + 0.05)


def test_category_colours_are_the_specified_ones_for_cards_and_preview_alike():
    defined = colours(BASE_CSS.split("@media (prefers-color-scheme: dark)", 1)[0])

    assert set(CATEGORY_COLOURS) == set(CATEGORY_ORDER)
    for category, colour in CATEGORY_COLOURS.items():
        assert defined[f"cat-{category}"].lower() == colour
        assert f".cat-{category} {{ --cat: var(--cat-{category}); }}" in BASE_CSS
    # Cards and preview blocks both draw their edge in the category colour.
    for selector in (".memory-card {", ".preview-block, .preview-line {"):
        rule = DASHBOARD_CSS.split(selector, 1)[1].split("}", 1)[0]
        assert "var(--cat" in rule, selector


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_text_colours_meet_wcag_aa_contrast(scheme):
    palette = schemes()[scheme]

    too_faint = {
        (fg, bg): round(contrast(palette[fg], palette[bg]), 2)
        for fg, bg in TEXT_PAIRS
        if contrast(palette[fg], palette[bg]) < WCAG_AA_TEXT
    }

    assert too_faint == {}


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_focus_ring_stands_out_and_every_control_shows_it(scheme):
    palette = schemes()[scheme]

    for background in ("bg", "surface", "surface-2"):
        assert contrast(palette["focus"], palette[background]) >= WCAG_AA_FOCUS
    focus_rule = BASE_CSS.split(":focus-visible {", 1)[1].split("}", 1)[0]
    assert "outline: 3px solid var(--focus)" in focus_rule
    assert "outline: none" not in BASE_CSS + DASHBOARD_CSS
    assert "outline: 0" not in BASE_CSS + DASHBOARD_CSS


class _Controls(HTMLParser):
    """Form controls a person fills in, and whether each one has a label."""

    def __init__(self) -> None:
        super().__init__()
        self.open_labels = 0
        self.label_targets: set[str] = set()
        self.controls: list[tuple[str, dict[str, str | None], bool]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "label":
            self.open_labels += 1
            if found.get("for"):
                self.label_targets.add(str(found["for"]))
        elif tag in ("input", "select", "textarea"):
            if found.get("type") in ("hidden", "submit", "button"):
                return
            wrapped = self.open_labels > 0
            named = bool(found.get("aria-label") or found.get("aria-labelledby"))
            self.controls.append((tag, found, wrapped or named))

    def handle_endtag(self, tag: str) -> None:
        if tag == "label" and self.open_labels:
            self.open_labels -= 1

    def unlabelled(self) -> list[str]:
        return [
            f"<{tag} name={attrs.get('name')!r} id={attrs.get('id')!r}>"
            for tag, attrs, labelled in self.controls
            if not labelled and attrs.get("id") not in self.label_targets
        ]


def unlabelled_controls(html: str) -> tuple[list[str], int]:
    parser = _Controls()
    parser.feed(html)
    parser.close()
    return parser.unlabelled(), len(parser.controls)


@pytest.mark.django_db
def test_every_form_control_has_a_label(logged_in, user, make_memory):
    memory = make_memory(tags=["t"], core=True)
    archived = make_memory(gist="Old")
    archive(owner=user, memory_id=archived.pk, source=ChangeSource.DASHBOARD)
    close(owner=user, reflection="Bye", conversation_url="https://claude.ai/chat/1")
    pages = {
        "list": logged_in.get("/dashboard/"),
        "gist editor": logged_in.get(f"/dashboard/memories/{memory.pk}/gist/", **htmx()),
        "gist page": logged_in.get(f"/dashboard/memories/{memory.pk}/gist/"),
        "delete question": logged_in.get(f"/dashboard/memories/{memory.pk}/delete/", **htmx()),
        "detail": logged_in.get(f"/dashboard/memories/{archived.pk}/"),
        "preview": logged_in.get("/dashboard/preview/"),
        "closings": logged_in.get("/dashboard/closings/"),
    }

    for name, response in pages.items():
        missing, _ = unlabelled_controls(response.text)
        assert missing == [], name
    # The list has the filters and each card's salience and core controls to check.
    _, count = unlabelled_controls(pages["list"].text)
    assert count >= 9


def test_the_login_page_labels_its_fields(client):
    missing, count = unlabelled_controls(client.get("/accounts/login/").text)

    assert (missing, count) == ([], 2)


@pytest.mark.django_db
def test_a_category_is_spelled_one_way_wherever_a_person_reads_it(logged_in, user, make_memory):
    memory = make_memory(category="episodic", gist="Drafting chapter three")
    remember(owner=user, update_id=str(memory.pk), category="active_thread")
    pages = {
        "list": logged_in.get("/dashboard/"),
        "list filtered": logged_in.get("/dashboard/?category=active_thread"),
        "detail": logged_in.get(f"/dashboard/memories/{memory.pk}/"),
        "preview": logged_in.get("/dashboard/preview/"),
    }

    for name, response in pages.items():
        text = page_text(response.text)
        assert "active thread" in text, name
        assert "active_thread" not in text, name
        assert "Active Thread" not in text, name
    detail = page_text(pages["detail"].text)
    assert "category active thread" in detail  # the fields
    assert "category episodic active thread" in detail  # the revision: before, after


@pytest.mark.django_db
def test_no_template_comment_shows_as_text(logged_in, make_memory):
    # Django's {# #} comments end on their line; one spread over two shows on the page.
    make_memory()
    for url in ("/dashboard/", "/dashboard/closings/", "/dashboard/clients/"):
        html = logged_in.get(url).text
        assert "{#" not in html and "#}" not in html, url
