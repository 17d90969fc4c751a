"""The MCP conformance suite's generic server scenarios against the real application.

The suite cannot send a bearer token, so the server under test is the application
wrapped by `tests.mcp.wrapped_apps:with_bearer_token`, which adds a valid one: the real
verifier, transport and tools stay in the path.
"""

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.live_server import run_server
from tests.mcp.tokens import make_access_token
from tests.mcp.wrapped_apps import TOKEN_FILE_VARIABLE
from tests.node_tools import node_command, node_env

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.server,
    pytest.mark.once_per_run,
]

SCENARIOS = [
    "server-initialize",
    "tools-list",
    "ping",
    "server-session-lifecycle",
    "server-stateless",
    "http-header-validation",
    "dns-rebinding-protection",
]
BASELINE = Path(__file__).with_name("conformance-baseline.yml")


def check_statuses(results: Path) -> list[str]:
    return [
        check["status"]
        for checks_file in results.glob("*/checks.json")
        for check in json.loads(checks_file.read_text())
    ]


def test_generic_server_scenarios_pass(user: Any, tmp_path: Path) -> None:
    conformance = node_command("conformance")
    token_file = tmp_path / "token"
    app = "tests.mcp.wrapped_apps:with_bearer_token"
    with run_server(
        tmp_dir=tmp_path, app=app, env={TOKEN_FILE_VARIABLE: str(token_file)}
    ) as server:
        token_file.write_text(make_access_token(user, resource=f"{server.url}/mcp"))
        for scenario in SCENARIOS:
            results = tmp_path / scenario
            run = subprocess.run(
                [
                    *conformance,
                    "server",
                    "--url",
                    f"{server.url}/mcp",
                    "--scenario",
                    scenario,
                    "--expected-failures",
                    str(BASELINE),
                    "-o",
                    str(results),
                ],
                capture_output=True,
                text=True,
                timeout=180,
                env=node_env(NO_COLOR="1"),
            )
            # Exit 0: no failure or warning outside the baseline, and no stale baseline entry.
            report = run.stdout[-3000:] + run.stderr[-2000:]
            assert run.returncode == 0, f"{scenario} failed:\n{report}\n{server.log()[-2000:]}"
            statuses = check_statuses(results)
            assert statuses, f"{scenario} ran no checks:\n{report}"
            if scenario != "server-session-lifecycle":  # only INFO for a stateless server
                assert "SUCCESS" in statuses, report
