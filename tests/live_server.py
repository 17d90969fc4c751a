"""A real uvicorn server in a child process, serving the test database.

The child cannot see pytest-django's connection, so it gets the test database's name
through DATABASE_URL (SQLite tests use a file-backed test database, see conftest).
Tests that talk to it must commit their data: `@pytest.mark.django_db(transaction=True)`.
"""

import fcntl
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO
from urllib.parse import quote

from django.conf import settings
from django.db import connection

ROOT = Path(__file__).resolve().parent.parent


# One lock file a port handed out, in a folder every test process on this machine shares.
PORT_LOCKS = Path(tempfile.gettempdir()) / "taproot-test-ports"
_ports_held: list[IO[str]] = []


def free_port() -> int:
    """A port free now and handed to no other test process while this one lives.

    Between this socket closing and the server binding the port, another process asking
    the system for a free port may be given the same one, and its tests would then talk
    to our server. Test runs go on side by side (CI's two passes, pytest-xdist's workers),
    so each port handed out stays locked (flock) until this process ends.
    """
    PORT_LOCKS.mkdir(exist_ok=True)
    while True:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port: int = sock.getsockname()[1]
        lock = open(PORT_LOCKS / str(port), "w")  # noqa: SIM115 - held until exit
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.close()
            continue
        _ports_held.append(lock)
        return port


def test_database_url() -> str:
    """DATABASE_URL naming the database this test session really uses."""
    database = connection.settings_dict
    if database["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{Path(database['NAME']).resolve()}"
    user = quote(database["USER"] or "")
    password = f":{quote(database['PASSWORD'])}" if database["PASSWORD"] else ""
    host = database["HOST"] or "127.0.0.1"
    port = f":{database['PORT']}" if database["PORT"] else ""
    return f"postgres://{user}{password}@{host}{port}/{database['NAME']}"


@dataclass
class LiveServer:
    url: str
    process: subprocess.Popen[bytes]
    log_path: Path

    def log(self, since: int = 0) -> str:
        """What the server wrote; with `since` (a log_position()), only what came after."""
        return self.log_path.read_bytes()[since:].decode(errors="replace")

    def log_position(self) -> int:
        return self.log_path.stat().st_size

    def wait_for_log(self, text: str, *, since: int = 0, timeout: float = 5) -> str:
        """The log after `since` once it holds `text` (the server logs a request after
        answering it), or as it stands after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while text not in (log := self.log(since)) and time.monotonic() < deadline:
            time.sleep(0.05)
        return log


@contextmanager
def run_server(
    *,
    workers: int = 1,
    env: dict[str, str] | None = None,
    tmp_dir: Path,
    app: str = "taproot_site.asgi:application",
    as_run_command: bool = False,
) -> Iterator[LiveServer]:
    """uvicorn through taproot_site.server, told its public URL; or, `as_run_command`, the
    way scripts/serve starts it (taproot_site.launch): only HOST, PORT and WORKERS, nothing
    about the public URL or proxies unless `env` says so."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    child_env = {
        **os.environ,
        "DATABASE_URL": test_database_url(),
        "DEBUG": "1" if settings.DEBUG else "0",
        "SECRET_KEY": settings.SECRET_KEY,
        "PYTHONUNBUFFERED": "1",
    }
    if as_run_command:
        for name in ("TAPROOT_PUBLIC_URL", "FORWARDED_ALLOW_IPS", "TAPROOT_TRUSTED_PROXIES"):
            child_env.pop(name, None)
        child_env.update(HOST="127.0.0.1", PORT=str(port), WORKERS=str(workers))
        command = [sys.executable, "-m", "taproot_site.launch", "--log-level", "warning"]
    else:
        child_env["TAPROOT_PUBLIC_URL"] = url
        command = [
            *(sys.executable, "-m", "taproot_site.server", app),
            *("--host", "127.0.0.1", "--port", str(port), "--lifespan", "on"),
            *("--workers", str(workers), "--log-level", "warning"),
        ]
    child_env.update(env or {})
    log_path = tmp_dir / f"uvicorn-{port}.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            command, cwd=ROOT, env=child_env, stdout=log, stderr=subprocess.STDOUT
        )
    server = LiveServer(url=url, process=process, log_path=log_path)
    try:
        _wait_until_healthy(server)
        yield server
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


# Importing Django, the apps and the MCP SDK takes a second or two on a quiet machine, and
# more than 30 s on the shared two-core machine under a load average of 20.
HEALTHY_WITHIN = 120.0


def _wait_until_healthy(server: LiveServer, timeout: float = HEALTHY_WITHIN) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(f"uvicorn exited early:\n{server.log()}")
        try:
            with urllib.request.urlopen(f"{server.url}/healthz", timeout=2) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.1)
    raise RuntimeError(f"uvicorn did not become healthy in {timeout} s:\n{server.log()}")
