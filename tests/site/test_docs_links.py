"""The README and the pages of docs/ point at one another: every relative link names a
file that exists, and every #anchor a heading of that file, so moving a section from one
page to another cannot leave a reader at a dead end."""

import re
from pathlib import Path

import pytest

from tests.live_server import ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# [text](target) and ![alt](target), outside code; a target has no spaces.
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def unfenced(text: str) -> str:
    return re.sub(r"^ *```.*?^ *```", "", text, flags=re.DOTALL | re.MULTILINE)


def prose(text: str) -> str:
    """The page without its fenced blocks and inline code, where brackets are not links."""
    return re.sub(r"`[^`\n]*`", "", unfenced(text))


def anchors(path: Path) -> set[str]:
    """The anchors GitHub gives the headings of a Markdown page."""
    found: set[str] = set()
    for line in unfenced(path.read_text()).splitlines():
        match = re.match(r"#{1,6} (.+)", line)
        if not match:
            continue
        slug = re.sub(r"[^\w\- ]", "", match.group(1).strip().lower()).replace(" ", "-")
        candidate, n = slug, 0
        while candidate in found:
            n += 1
            candidate = f"{slug}-{n}"
        found.add(candidate)
    return found


def relative_links(page: Path) -> list[str]:
    return [
        target
        for target in LINK.findall(prose(page.read_text()))
        if not re.match(r"[a-z][a-z0-9+.-]*:", target)  # https:, mailto:, file:
    ]


def test_the_pages_have_links_to_check():
    assert (ROOT / "docs" / "connecting-claude.md") in PAGES
    assert len(relative_links(ROOT / "README.md")) >= 10


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_every_relative_link_names_a_file_and_heading_that_exist(page):
    broken = []
    for target in relative_links(page):
        path_part, _, anchor = target.partition("#")
        path = (page.parent / path_part).resolve() if path_part else page
        if not path.exists():
            broken.append(f"{target}: no such file")
        elif anchor and path.suffix == ".md" and anchor not in anchors(path):
            broken.append(f"{target}: no heading #{anchor} in {path.name}")
    assert broken == []


def test_the_anchor_rule_is_github_s():
    # The slugs the pages rely on: numbered, with commas, with code in the heading.
    page = ROOT / "docs" / "connecting-claude.md"
    assert "2-settings-for-a-public-server" in anchors(page)
    assert "when-claude-forgets-its-tools" in anchors(page)
    assert "logging-in-and-too-many-wrong-passwords" in anchors(ROOT / "docs" / "dashboard.md")


def test_the_readme_stays_short():
    # The README says what Taproot is, how to run, test and connect it, and where to read
    # on; everything else belongs on a page of docs/.
    assert len((ROOT / "README.md").read_text().splitlines()) <= 200
