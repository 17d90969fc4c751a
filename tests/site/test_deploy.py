"""The systemd units in deploy/: what systemd itself makes of them, and the settings the
server's unit must keep."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import require_tool

ROOT = Path(__file__).resolve().parent.parent.parent
DEPLOY = ROOT / "deploy"


@pytest.fixture
def systemd_analyze() -> None:
    require_tool(shutil.which("systemd-analyze") is not None, "systemd-analyze is not installed")


def check_units(folder: Path = DEPLOY, root: Path = ROOT) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if not (root / ".venv" / "bin" / "python").exists():
        # A checkout tested from another environment: the units' Python is this one.
        env["TAPROOT_UNIT_PYTHON"] = sys.executable
    return subprocess.run(
        [str(root / ".ci" / "check-units"), str(folder)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
    )


def settings_of(unit: Path) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for line in unit.read_text().splitlines():
        if "=" in line and not line.startswith(("#", "[")):
            key, value = line.split("=", 1)
            found.setdefault(key, []).append(value)
    return found


def test_systemd_analyze_finds_nothing_to_say_about_the_units(systemd_analyze):
    checked = check_units()

    assert checked.returncode == 0, checked.stdout + checked.stderr
    for unit in ("taproot.service", "taproot-backup.service", "taproot-backup.timer"):
        assert unit in checked.stdout


def test_the_units_check_passes_in_a_checkout_without_a_venv(systemd_analyze, tmp_path):
    checkout = tmp_path / "checkout"
    for part in (".ci", "deploy", "scripts"):
        shutil.copytree(ROOT / part, checkout / part)

    checked = check_units(checkout / "deploy", root=checkout)

    assert not (checkout / ".venv").exists()
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "taproot-backup.service" in checked.stdout


def test_a_setting_systemd_would_ignore_fails_the_check(systemd_analyze, tmp_path):
    for unit in DEPLOY.iterdir():
        shutil.copy(unit, tmp_path)
    server = tmp_path / "taproot.service"
    server.write_text(server.read_text().replace("Restart=on-failure", "Restart=when-it-fails"))

    checked = check_units(tmp_path)

    assert checked.returncode != 0
    assert "Failed to parse service restart specifier" in checked.stdout


def test_a_less_hardened_server_unit_fails_the_check(systemd_analyze, tmp_path):
    for unit in DEPLOY.iterdir():
        shutil.copy(unit, tmp_path)
    server = tmp_path / "taproot.service"
    lines = server.read_text().splitlines()
    loose = ("ProtectSystem=", "ProtectHome=", "PrivateDevices=", "CapabilityBoundingSet=")
    server.write_text("\n".join(line for line in lines if not line.startswith(loose)) + "\n")

    checked = check_units(tmp_path)

    assert checked.returncode != 0
    assert "less hardened than it was" in checked.stderr


def test_the_server_runs_as_its_own_user_restarts_on_failure_and_writes_only_its_folders():
    unit = settings_of(DEPLOY / "taproot.service")

    assert unit["User"] == ["taproot"]
    assert unit["EnvironmentFile"] == ["/etc/taproot.env"]
    assert unit["ExecStart"] == ["/srv/taproot/scripts/serve"]
    assert unit["Restart"] == ["on-failure"]
    assert unit["NoNewPrivileges"] == ["yes"]
    assert unit["PrivateTmp"] == ["yes"]
    assert unit["ProtectSystem"] == ["strict"]
    # The data folder (/var/lib/taproot) and the checkout, nothing else.
    assert unit["StateDirectory"] == ["taproot"]
    assert unit["ReadWritePaths"] == ["/srv/taproot"]


def test_the_backup_job_keeps_two_weeks_in_the_data_folder():
    job = settings_of(DEPLOY / "taproot-backup.service")
    timer = settings_of(DEPLOY / "taproot-backup.timer")

    assert job["ExecStart"] == [
        "/srv/taproot/.venv/bin/python manage.py backup_taproot "
        "--output /var/lib/taproot/backups --keep 14"
    ]
    assert job["EnvironmentFile"] == ["/etc/taproot.env"]
    assert timer["Persistent"] == ["true"]


def test_the_operations_page_shows_the_backup_job_as_deploy_holds_it():
    page = (ROOT / "docs" / "operations.md").read_text()
    job = (DEPLOY / "taproot-backup.service").read_text()
    timer = (DEPLOY / "taproot-backup.timer").read_text()

    assert f"# /etc/systemd/system/taproot-backup.service\n{job}" in page
    assert f"# /etc/systemd/system/taproot-backup.timer\n{timer}" in page
    command = settings_of(DEPLOY / "taproot-backup.service")["ExecStart"][0]
    cron = next(line for line in page.splitlines() if line.startswith("30 3 * * *"))
    assert cron.endswith(command.replace("/srv/taproot/.venv", ".venv"))


def units_the_docs_show() -> dict[str, str]:
    """Each unit file the README or docs/ shows, by the name its `# /etc/systemd/system/…`
    line gives."""
    units: dict[str, str] = {}
    name = None
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    lines = [line for page in pages for line in page.read_text().splitlines()]
    for line in lines:
        if line.startswith("# /etc/systemd/system/"):
            name = line.rsplit("/", 1)[1]
            units[name] = ""
        elif line.startswith("```"):
            name = None
        elif name is not None:
            units[name] += line + "\n"
    return units


def test_every_unit_shown_or_shipped_runs_as_the_taproot_user():
    units = units_the_docs_show()
    for unit in DEPLOY.iterdir():
        units[f"deploy/{unit.name}"] = unit.read_text()
    timers = [name for name in units if name.endswith(".timer")]
    assert "taproot-cleanup.timer" in timers and "deploy/taproot-backup.timer" in timers

    for name, text in units.items():
        if name.endswith(".service"):
            assert "\nUser=taproot\n" in text, f"{name} would run as root"
    for timer in timers:
        # A timer starts the service of its name, which is what needs the User= line.
        assert timer.removesuffix(".timer") + ".service" in units, timer
