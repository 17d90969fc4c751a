"""The MCP conformance suite's authorization-server metadata scenario against a real server."""

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.node_tools import node_command, node_env

pytestmark = [pytest.mark.server, pytest.mark.once_per_run]

# Taproot does not accept Client ID Metadata Documents (Claude registers dynamically),
# and the suite notes that with a warning.
EXPECTED_WARNINGS = {"authorization-server-metadata-cimd"}


def test_authorization_server_metadata_scenario_passes(
    live_server_process: Any, tmp_path: Path
) -> None:
    conformance = node_command("conformance")
    run = subprocess.run(
        [
            *conformance,
            "authorization",
            "--url",
            live_server_process.url,
            "--scenario",
            "authorization-server-metadata-endpoint",
            "-o",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=180,
        env=node_env(NO_COLOR="1"),
    )
    report = run.stdout[-3000:] + run.stderr[-2000:]
    assert run.returncode == 0, report
    checks = [
        check
        for checks_file in tmp_path.glob("*/checks.json")
        for check in json.loads(checks_file.read_text())
    ]
    statuses = {check["id"]: check["status"] for check in checks}
    assert statuses.get("authorization-server-metadata") == "SUCCESS", report
    unexpected = {
        check_id: status
        for check_id, status in statuses.items()
        if status != "SUCCESS" and not (status == "WARNING" and check_id in EXPECTED_WARNINGS)
    }
    assert not unexpected, report
    metadata = next(c for c in checks if c["id"] == "authorization-server-metadata")
    assert metadata["details"]["body"]["issuer"] == live_server_process.url
