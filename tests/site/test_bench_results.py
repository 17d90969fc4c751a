"""The figures the pages stand on live in bench/results/<name>.json and the pages name them
by file (issue 34): every file a page names is there and reads as JSON, and every file
kept there is named by some page, so a conclusion never loses its figures and no run
is kept that nothing reads."""

import json
import re

from tests.live_server import ROOT

RESULTS = ROOT / "bench" / "results"
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
NAMED = re.compile(r"bench/results/([\w.-]+\.json)")


def named_by_pages() -> dict[str, list[str]]:
    """Each file of bench/results/ a page names, with the pages that name it."""
    named: dict[str, list[str]] = {}
    for page in PAGES:
        for name in NAMED.findall(page.read_text()):
            named.setdefault(name, []).append(page.name)
    return named


def kept_out() -> set[str]:
    """The files of bench/results/ .gitignore keeps out (the copy of the latest run)."""
    lines = (ROOT / ".gitignore").read_text().splitlines()
    return {line.removeprefix("/bench/results/") for line in lines if NAMED.fullmatch(line[1:])}


def test_every_file_a_page_names_is_there_and_reads_as_json():
    named = named_by_pages()
    assert "context-after.json" in named  # the pattern finds the names as pages write them
    missing = {name: pages for name, pages in named.items() if not (RESULTS / name).is_file()}
    assert missing == {}
    for name in named:
        assert isinstance(json.loads((RESULTS / name).read_text()), dict), name


def test_every_file_kept_is_named_by_a_page():
    assert "latest.json" in kept_out()
    kept = {path.name for path in RESULTS.glob("*.json")} - kept_out()
    assert "context-before.json" in kept
    assert kept - set(named_by_pages()) == set()


def test_the_files_the_page_moved_out_keep_their_tables():
    # A file of figures moved out of docs/benchmarks.md says what it holds and how it was
    # measured, and keeps each table as rows keyed by the column headings.
    moved = [
        path
        for path in RESULTS.glob("*.json")
        if json.loads(path.read_text()).get("page") == "docs/benchmarks.md"
    ]
    assert len(moved) >= 20
    for path in moved:
        data = json.loads(path.read_text())
        assert data["title"] and isinstance(data["commands"], list), path.name
        assert data["tables"], path.name
        for table in data["tables"]:
            assert table["rows"] and all(isinstance(row, dict) for row in table["rows"])
