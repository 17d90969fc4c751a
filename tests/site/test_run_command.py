"""The run command as a newcomer meets it: scripts/serve on a fresh database, and the
install scripts/lib.sh does into a fresh virtual environment. Their output is what a
newcomer reads, so it must hold what they need and not the noise of the tools beneath."""

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.live_server import free_port

ROOT = Path(__file__).resolve().parents[2]

# Backend-independent: each test makes its own database or environment.
pytestmark = pytest.mark.once_per_run


def run_serve_until_it_listens(tmp_path: Path, timeout: float = 90) -> str:
    """Everything scripts/serve prints until uvicorn listens, then stop it."""
    port = free_port()
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{tmp_path / 'fresh.sqlite3'}",
        "TAPROOT_ADMIN_USER": "newcomer",
        "TAPROOT_ADMIN_PASSWORD": "a-long-newcomer-password-1",
        "HOST": "127.0.0.1",
        "PORT": str(port),
        # The virtual environment the suite runs in: installed, so nothing is reinstalled.
        "TAPROOT_VENV": sys.prefix,
    }
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        serve = subprocess.Popen(
            [str(ROOT / "scripts" / "serve")],
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + timeout
        while "Uvicorn running on" not in log.read_text() and time.monotonic() < deadline:
            assert serve.poll() is None, f"scripts/serve stopped:\n{log.read_text()}"
            time.sleep(0.2)
    finally:
        os.killpg(serve.pid, signal.SIGTERM)
        serve.wait(timeout=30)
    output = log.read_text()
    assert "Uvicorn running on" in output, output
    return output


def test_serve_on_a_fresh_database_says_nothing_about_a_cache_table(tmp_path):
    output = run_serve_until_it_listens(tmp_path)

    assert "Cache table" not in output
    assert "already exists" not in output
    assert "Created the first account: newcomer" in output
    assert "Traceback" not in output and "Warning" not in output


def ensure_venv(root: Path, venv: Path) -> subprocess.CompletedProcess[str]:
    """scripts/lib.sh's ensure_venv, as scripts/serve runs it, into `venv`."""
    return subprocess.run(
        ["bash", "-c", '. "$1/scripts/lib.sh" && ensure_venv', "ensure_venv", str(root)],
        env={**os.environ, "TAPROOT_VENV": str(venv), "TAPROOT_PYTHON": sys.executable},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def test_the_first_install_shows_no_setuptools_banner(tmp_path):
    done = ensure_venv(ROOT, tmp_path / "venv")

    assert done.returncode == 0, done.stderr
    output = done.stdout + done.stderr
    assert f"Installing Taproot into {tmp_path / 'venv'} ..." in output
    assert "Editable install" not in output
    assert "BuildBackendWarning" not in output
    assert "!!" not in output and "*****" not in output


def test_an_install_that_fails_still_says_why(tmp_path):
    # A copy of the project's install files, pinned to a Django it cannot use.
    project = tmp_path / "project"
    (project / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "lib.sh", project / "scripts" / "lib.sh")
    shutil.copy(ROOT / "pyproject.toml", project / "pyproject.toml")
    (project / "README.md").write_text("A copy.\n")
    (project / "constraints.txt").write_text("django==5.2\n")

    done = ensure_venv(project, tmp_path / "venv")

    assert done.returncode != 0
    assert "ERROR" in done.stderr and "django" in done.stderr.lower()
    assert not (tmp_path / "venv" / ".taproot-installed").exists()
