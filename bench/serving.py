"""Taproot served as in production, for the benchmarks that call it over HTTP: uvicorn
started as `scripts/serve` starts it (`python -m taproot_site.server`, production
settings) on a free port, a token from `manage.py issue_token`, and the real MCP client
connected with it, speaking the 2025 handshake era as Claude.ai does today.

Used by bench.http_bench and by the runs that start a server of their own (fixed_cost,
flood, many_users, one_owner, child).
"""

import io
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import AsyncExitStack, contextmanager
from pathlib import Path
from typing import Any

from bench.database import bench_environment

ROOT = Path(__file__).resolve().parent.parent
CLIENT_MODE = "legacy"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def public_url(port: int) -> str:
    return f"http://127.0.0.1:{port}"


def issue_token(username: str) -> str:
    from django.core.management import call_command

    out = io.StringIO()
    call_command("issue_token", user=username, days=1, stdout=out, stderr=io.StringIO())
    return out.getvalue().strip()


@contextmanager
def uvicorn_server(
    database_url: str, port: int, workers: int, *, under: Sequence[str] = ()
) -> Iterator[str]:
    """uvicorn serving Taproot on this database, as `scripts/serve` does; yields its base URL.

    `under`: a command that runs the server (a profiler's), which stops on SIGINT."""
    url = public_url(port)
    env = {
        **os.environ,
        **bench_environment(database_url),
        "SECRET_KEY": os.environ["SECRET_KEY"],
        "TAPROOT_PUBLIC_URL": url,
        "PYTHONUNBUFFERED": "1",
    }
    with tempfile.NamedTemporaryFile("w+b", prefix="taproot-bench-uvicorn-", suffix=".log") as log:
        command = [*under, sys.executable, "-m", "taproot_site.server"]
        command.append("taproot_site.asgi:application")
        command += ["--host", "127.0.0.1", "--port", str(port), "--lifespan", "on"]
        command += ["--workers", str(workers), "--log-level", "warning", "--no-access-log"]
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            wait_until_healthy(url, process, Path(log.name))
            yield url
        finally:
            process.send_signal(signal.SIGINT if under else signal.SIGTERM)
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def wait_until_healthy(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"uvicorn exited early:\n{log.read_text(errors='replace')}")
        try:
            with urllib.request.urlopen(f"{url}/healthz", timeout=2) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.2)
    raise RuntimeError(f"uvicorn did not become healthy:\n{log.read_text(errors='replace')}")


async def open_client(stack: AsyncExitStack, url: str, token: str) -> Any:
    import httpx2
    from mcp.client import Client
    from mcp.client.streamable_http import streamable_http_client

    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60)
    # The transport does not close a client it is handed.
    stack.push_async_callback(http.aclose)
    return await stack.enter_async_context(
        Client(streamable_http_client(f"{url}/mcp", http_client=http), mode=CLIENT_MODE)
    )
