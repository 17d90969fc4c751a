"""The connections /mcp keeps between requests (mcp_bridge.database) never turn a request
into an error: a PostgreSQL connection the server dropped is replaced, and a SQLite file
replaced underneath by a restore is reopened rather than read from the old one.

Real uvicorn servers, real MCP clients, a real restore.
"""

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import connection

from tests.conftest import is_postgres
from tests.live_server import ROOT, run_server
from tests.mcp.client import McpCaller, mcp_client
from tests.mcp.test_endpoint import connection_states, settle
from tests.mcp.tokens import make_access_token

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.server]


def sqlite_copy(source: Path | str, target: Path) -> None:
    """A consistent copy of a SQLite database, as a backup tool makes it."""
    with sqlite3.connect(source) as original, sqlite3.connect(target) as copy:
        original.backup(copy)
    copy.close()
    original.close()


def issue_token(database: Path, server_url: str, username: str) -> str:
    """`manage.py issue_token`, run as an operator would against this database."""
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{database}"}
    env["TAPROOT_PUBLIC_URL"] = server_url
    done = subprocess.run(
        [sys.executable, "manage.py", "issue_token", "--user", username, "--days", "1"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def test_a_sqlite_file_replaced_by_a_restore_is_read_from_the_next_request_on(
    tmp_path, portal, user
):
    if is_postgres():
        pytest.skip("a SQLite file restored under a running server: SQLite only")
    live = tmp_path / "taproot.sqlite3"
    sqlite_copy(connection.settings_dict["NAME"], live)  # migrated, with alice in it
    backup = tmp_path / "backup.sqlite3"
    with run_server(tmp_dir=tmp_path, env={"DATABASE_URL": f"sqlite:///{live}"}) as server:
        token = issue_token(live, server.url, user.username)
        sqlite_copy(live, backup)  # the backup: alice, her token, no memories yet
        session = mcp_client(f"{server.url}/mcp", token, mode="legacy", timeout=10)
        with portal.wrap_async_context_manager(session) as client:
            mcp = McpCaller(portal=portal, client=client)
            for n in range(12):  # the threads serving them keep their connections open
                note = {
                    "category": "episodic",
                    "content": f"Kept after the backup ({n}).",
                    "gist": "Late",
                }
                mcp.reply("taproot_remember", note)
            assert mcp.reply("taproot_status")["live_memories"] == 12
            original = live.stat().st_ino
            # The restore: the operator folds the log into the file (as stopping every
            # writer would), then puts the backup in its place.
            with sqlite3.connect(live) as operator:
                operator.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            operator.close()
            os.replace(backup, live)
            assert live.stat().st_ino != original
            for _ in range(12):  # whichever thread serves it, each reads the restored file
                assert mcp.reply("taproot_status")["live_memories"] == 0
            mcp.reply("taproot_remember", {**note, "content": "Written after the restore."})
            assert mcp.reply("taproot_status")["live_memories"] == 1
    assert "Traceback" not in server.log(), server.log()
    # Stopped, the server left the restored file whole, with what was written since.
    with sqlite3.connect(live) as restored:
        (count,) = restored.execute(
            "SELECT count(*) FROM memories_memory WHERE content = 'Written after the restore.'"
        ).fetchone()
        assert restored.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    restored.close()
    assert count == 1


POOLED_NAME = "taproot-test-kept-connections"


def test_postgres_connections_the_server_dropped_do_not_fail_the_next_tool_call(
    tmp_path, portal, user
):
    if not is_postgres():
        pytest.skip("pg_terminate_backend: PostgreSQL only (CI runs this in its pass)")
    with run_server(tmp_dir=tmp_path, env={"PGAPPNAME": POOLED_NAME}) as server:
        token = make_access_token(user, resource=f"{server.url}/mcp")
        session = mcp_client(f"{server.url}/mcp", token, mode="legacy", timeout=10)
        with portal.wrap_async_context_manager(session) as client:
            mcp = McpCaller(portal=portal, client=client)
            note = {"category": "episodic", "content": "Before the restart.", "gist": "Early"}
            for n in range(5):  # each different: an identical one is a retry, stored once
                mcp.reply("taproot_remember", {**note, "content": f"Before the restart ({n})."})
            assert settle(lambda: connection_states(POOLED_NAME), lambda s: bool(s))
            # As a database restart, or an idle timeout on the way, would.
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND application_name = %s",
                    [POOLED_NAME],
                )
            assert mcp.reply("taproot_status")["live_memories"] == 5
            mcp.reply("taproot_remember", {**note, "content": "Lighthouse after the outage."})
            assert mcp.reply("taproot_recall", {"query": "lighthouse"})["count"] == 1
    assert "Traceback" not in server.log(), server.log()
