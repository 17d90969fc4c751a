"""The install scripts/lib.sh does, when it refuses or fails: what it prints is all a
newcomer has.

What a successful first install and scripts/serve on a fresh database print is checked
where CI already does both, on a fresh clone: the install step of .ci/run and
.ci/newcomer-walk. Only a refused or failing install is not done there."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Backend-independent: each test makes its own database or environment.
pytestmark = pytest.mark.once_per_run


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


def pip_pin() -> str:
    """constraints.txt's line for pip: ensure_venv installs that pip before anything else."""
    lines = (ROOT / "constraints.txt").read_text().splitlines()
    return next(line for line in lines if line.startswith("pip=="))


def test_an_install_that_fails_still_says_why(tmp_path):
    # A copy of the project's install files, pinned to a Django it cannot use.
    project = tmp_path / "project"
    (project / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "lib.sh", project / "scripts" / "lib.sh")
    shutil.copy(ROOT / "pyproject.toml", project / "pyproject.toml")
    (project / "README.md").write_text("A copy.\n")
    (project / "constraints.txt").write_text(f"{pip_pin()}\ndjango==5.2\n")

    done = ensure_venv(project, tmp_path / "venv")

    assert done.returncode != 0
    assert "ERROR" in done.stderr and "django" in done.stderr.lower()
    assert not (tmp_path / "venv" / ".taproot-installed").exists()


def test_an_install_refuses_constraints_that_do_not_pin_pip(tmp_path):
    project = tmp_path / "project"
    (project / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "lib.sh", project / "scripts" / "lib.sh")
    shutil.copy(ROOT / "pyproject.toml", project / "pyproject.toml")
    pins = (ROOT / "constraints.txt").read_text().replace(f"{pip_pin()}\n", "")
    (project / "constraints.txt").write_text(pins)

    done = ensure_venv(project, tmp_path / "venv")

    assert done.returncode != 0
    assert "constraints.txt pins no pip version" in done.stderr
    assert not (tmp_path / "venv" / ".taproot-installed").exists()
