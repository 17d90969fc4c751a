"""No file of the application passes 500 lines (issue 34): a module that grows past it is
split along a seam of its own (STYLE.md: split a module by topic before it passes a few
hundred lines). The application is every Python file git tracks outside tests/."""

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
MOST_LINES = 500


def application_files() -> list[str]:
    listed = subprocess.run(
        ["git", "ls-files", "*.py"], capture_output=True, text=True, cwd=ROOT, check=True
    ).stdout.splitlines()
    return [path for path in listed if not path.startswith("tests/")]


def lines(path: str) -> int:
    return len((ROOT / path).read_text(encoding="utf-8").splitlines())


def test_no_application_file_passes_500_lines():
    files = application_files()
    assert "memories/recall/scoring.py" in files  # the listing reaches the application
    assert not any(path.startswith("tests/") for path in files)
    too_long = {path: lines(path) for path in files if lines(path) > MOST_LINES}
    assert too_long == {}
