import json
import subprocess
import sys
import urllib.request

import pytest

from tests.live_server import PORT_LOCKS, free_port


@pytest.mark.django_db(transaction=True)
def test_uvicorn_serves_the_app_with_lifespan_on(live_server_process):
    with urllib.request.urlopen(f"{live_server_process.url}/healthz") as response:
        assert json.load(response) == {"status": "ok", "database": "ok"}
    with urllib.request.urlopen(f"{live_server_process.url}/static/css/taproot.css") as response:
        assert response.status == 200
        assert b"--cat-identity" in response.read()


def test_a_port_handed_out_stays_locked_against_other_test_processes():
    # CI's passes and pytest-xdist's workers start servers side by side: none may be
    # handed a port another one found free a moment before.
    port = free_port()
    probe = subprocess.run(
        [sys.executable, "-c", LOCK_PORT, str(PORT_LOCKS / str(port))],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert probe.returncode != 0
    assert "BlockingIOError" in probe.stderr


LOCK_PORT = """
import fcntl, sys
fcntl.flock(open(sys.argv[1], "w"), fcntl.LOCK_EX | fcntl.LOCK_NB)
"""
