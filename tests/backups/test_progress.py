"""The long commands show progress on a terminal, and nothing on a pipe (cron, systemd)."""

import fcntl
import os
import pty
import struct
import subprocess
import sys
import termios
import threading

import pytest
from django.conf import settings

from tests import live_server
from tests.backups.support import ROOT, manage, the_backup
from tests.conftest import is_postgres

pytestmark = pytest.mark.django_db(transaction=True)


def on_a_terminal(*args: str, database_url: str) -> tuple[int, str, str]:
    """Run `manage.py ARGS` with standard error on a terminal 120 columns wide; its exit
    status, standard output and what the terminal showed."""
    terminal, child_end = pty.openpty()
    fcntl.ioctl(child_end, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    process = subprocess.Popen(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env={**os.environ, "DATABASE_URL": database_url, "SECRET_KEY": settings.SECRET_KEY},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=child_end,
        text=True,
    )
    os.close(child_end)
    shown: list[bytes] = []

    def read() -> None:
        while True:
            try:
                chunk = os.read(terminal, 4096)
            except OSError:  # the other end closed
                return
            if not chunk:
                return
            shown.append(chunk)

    reader = threading.Thread(target=read)
    reader.start()
    out, _ = process.communicate(timeout=300)
    reader.join(timeout=30)
    os.close(terminal)
    return process.returncode, out, b"".join(shown).decode(errors="replace")


def test_backup_and_restore_show_progress_on_a_terminal(store, tmp_path, empty_database):
    code, out, shown = on_a_terminal(
        "backup_taproot", "--output", str(tmp_path), database_url=live_server.test_database_url()
    )

    assert code == 0, shown
    assert ("Dumping" if is_postgres() else "Copying") in shown
    assert "Packing" in shown and "100%" in shown
    assert "Wrote " in out and "Wrote " not in shown  # the outcome goes to standard output

    code, out, shown = on_a_terminal(
        "restore_taproot", str(the_backup(tmp_path)), database_url=empty_database
    )

    assert code == 0, shown
    assert "Reading" in shown and "Restoring" in shown and "100%" in shown
    assert "Restored " in out


def test_backup_and_restore_are_quiet_without_a_terminal(store, tmp_path, empty_database):
    backed_up = manage(
        "backup_taproot", "--output", str(tmp_path), database_url=live_server.test_database_url()
    )
    restored = manage("restore_taproot", str(the_backup(tmp_path)), database_url=empty_database)

    for done in (backed_up, restored):
        assert done.returncode == 0, done.stderr
        assert done.stderr == ""
        assert len(done.stdout.splitlines()) == 1  # one line saying what was done
