"""A setting the environment gets wrong stops the server and manage.py with one line that
says what to do, not a traceback: a newcomer reads the first line, and a traceback's
first line is `Traceback (most recent call last):`."""

import os
import re
import subprocess
import sys

import pytest

from tests.live_server import ROOT

# Backend-independent: the settings are refused before any database is opened.
pytestmark = pytest.mark.once_per_run

COMMANDS = {
    "manage.py": [sys.executable, "manage.py", "check"],
    "the run command's server": [sys.executable, "-m", "taproot_site.launch"],
    "uvicorn's command line": [
        *(sys.executable, "-m", "taproot_site.server", "taproot_site.asgi:application"),
    ],
}


def run_without_a_secret_key(command: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    clean = {
        k: v
        for k, v in os.environ.items()
        if k not in {"SECRET_KEY", "DEBUG", "DJANGO_SETTINGS_MODULE"}
        and not k.startswith("TAPROOT_")
    }
    return subprocess.run(
        command,
        cwd=ROOT,
        env={**clean, "DEBUG": "0", "PORT": "1", **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize("command", COMMANDS.values(), ids=COMMANDS.keys())
def test_a_missing_secret_key_is_one_line_naming_python3(command):
    run = run_without_a_secret_key(command)

    assert run.returncode == 1
    assert "Traceback" not in run.stderr
    (line,) = run.stderr.strip().splitlines()
    assert line.startswith("SECRET_KEY must be set when DEBUG is off")
    assert "python3 -c" in line


def test_the_command_the_line_names_makes_a_key_debian_can_run():
    line = run_without_a_secret_key(COMMANDS["manage.py"]).stderr
    match = re.search(r"`(python3 -c .+?)`", line)
    assert match, line
    made = subprocess.run(
        ["sh", "-c", match.group(1)], capture_output=True, text=True, timeout=60, check=True
    )
    assert len(made.stdout.strip()) >= 50


def test_another_malformed_setting_is_one_line_too():
    run = run_without_a_secret_key(COMMANDS["manage.py"], SECRET_KEY="s" * 50, PORT="http")
    assert run.returncode == 1
    assert run.stderr.strip().splitlines() == ["PORT must be a whole number (got 'http')."]
