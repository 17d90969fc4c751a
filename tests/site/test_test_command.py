"""The README's test command, scripts/test: what it prints is how a newcomer learns why a
part of the suite did not run."""

import subprocess

import pytest

from tests.live_server import ROOT

# Backend-independent: it runs a suite of its own.
pytestmark = pytest.mark.once_per_run

SKIPPING_SUITE = """
import pytest


def test_that_needs_a_missing_tool():
    pytest.skip("needs the frobnicator, which this machine lacks")
"""


def test_the_test_command_says_why_each_skipped_test_was_skipped(tmp_path):
    suite = tmp_path / "test_skipping.py"
    suite.write_text(SKIPPING_SUITE)

    run = subprocess.run(
        [str(ROOT / "scripts" / "test"), str(suite), "-p", "no:xdist"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )

    assert run.returncode == 0, run.stdout + run.stderr
    assert "1 skipped" in run.stdout
    assert "SKIPPED [1]" in run.stdout
    assert "needs the frobnicator, which this machine lacks" in run.stdout
