"""scripts/inspector-smoke (the MCP Inspector CLI) against a running server."""

import subprocess
from typing import Any

import pytest

from mcp_bridge.tools import DEFINITIONS
from tests.live_server import ROOT
from tests.node_tools import node_command, node_env

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.server,
    pytest.mark.once_per_run,
]

SCRIPT = ROOT / "scripts" / "inspector-smoke"


def smoke(mcp_url: str, token: str) -> subprocess.CompletedProcess[str]:
    node_command("inspector")  # skips (or fails in CI) when Node 22 or the Inspector is missing
    return subprocess.run(
        [str(SCRIPT), mcp_url],
        capture_output=True,
        text=True,
        timeout=300,
        env=node_env(TAPROOT_TOKEN=token),
    )


def test_the_inspector_lists_and_calls_the_tools(mcp_url: str, token_for: Any, user: Any) -> None:
    run = smoke(mcp_url, token_for(user))
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"tools/list: the {len(DEFINITIONS)} Taproot tools of this checkout" in run.stdout
    assert "refused as a tool error" in run.stdout
    assert run.stdout.rstrip().endswith("Inspector smoke test passed.")


def test_the_smoke_test_fails_with_a_refused_token(mcp_url: str) -> None:
    run = smoke(mcp_url, "not-a-live-token")
    assert run.returncode == 1
    assert "TAPROOT_TOKEN" in run.stderr
