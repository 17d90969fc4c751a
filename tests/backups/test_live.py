"""A backup taken while a real server serves writes, restored into an empty database
that a new server then serves: every write acknowledged before the backup began is
there, and a token issued before the backup still works, through the real MCP client."""

import threading
import time
from dataclasses import dataclass, field
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command

from tests.backups.support import manage, manifest_of, query, the_backup
from tests.live_server import run_server
from tests.mcp.client import McpCaller, mcp_client
from tests.mcp.tokens import make_access_token

pytestmark = [pytest.mark.server, pytest.mark.django_db(transaction=True)]

WRITERS = 3


@dataclass
class Write:
    sent: float
    acknowledged: float
    memory_id: str


@dataclass
class Writers:
    """Threads that each keep writing memories through their own MCP session."""

    portal: Any
    url: str
    token: str
    done: list[Write] = field(default_factory=list)
    errors: list[BaseException] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def __enter__(self) -> "Writers":
        self.threads = [threading.Thread(target=self.write, args=(n,)) for n in range(WRITERS)]
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout=60)

    def write(self, writer: int) -> None:
        try:
            with self.portal.wrap_async_context_manager(
                mcp_client(self.url, self.token, mode="legacy")
            ) as client:
                caller = McpCaller(portal=self.portal, client=client)
                n = 0
                while not self.stop.is_set():
                    sent = time.monotonic()
                    reply = caller.reply(
                        "taproot_remember",
                        {
                            "category": "episodic",
                            "content": f"Writer {writer} wrote note {n} in the garden log.",
                            "gist": f"Garden log {writer}.{n}",
                        },
                    )
                    self.done.append(Write(sent, time.monotonic(), reply["memory_id"]))
                    n += 1
        except BaseException as error:  # reported by the test, in the main thread
            self.errors.append(error)


def test_a_backup_under_writes_restores_every_acknowledged_write_and_serves_its_tokens(
    live_server_process, portal, user, tmp_path, empty_database
):
    server = live_server_process
    mcp_url = f"{server.url}/mcp"
    token = make_access_token(user, resource=mcp_url)
    folder = tmp_path / "backups"

    with Writers(portal, mcp_url, token) as writers:
        while len(writers.done) < 10 and not writers.errors:
            time.sleep(0.05)
        began = time.monotonic()
        call_command("backup_taproot", "--output", str(folder), stdout=StringIO())
        ended = time.monotonic()
        while not [w for w in writers.done if w.sent > ended] and not writers.errors:
            time.sleep(0.05)  # writes go on after it, too
    assert writers.errors == []
    in_flight = [w for w in writers.done if w.sent < ended and w.acknowledged > began]
    assert in_flight, "no write was in flight while the backup ran"
    made = the_backup(folder)

    restored = manage("restore_taproot", str(made), database_url=empty_database)

    assert restored.returncode == 0, restored.stderr
    present = {
        str(row[0]).replace("-", "")
        for row in query(empty_database, "SELECT id FROM memories_memory")
    }
    before = [w.memory_id.replace("-", "") for w in writers.done if w.acknowledged < began]
    assert before and set(before) <= present
    # A snapshot of one moment during the backup: nothing sent after it ended is there.
    after = [w.memory_id.replace("-", "") for w in writers.done if w.sent > ended]
    assert after and not set(after) & present
    assert len(present) == manifest_of(made).counts["memories"]

    # Same public URL: the token is bound to it. Another port, another process.
    with (
        run_server(
            env={"DATABASE_URL": empty_database, "TAPROOT_PUBLIC_URL": server.url}, tmp_dir=tmp_path
        ) as again,
        portal.wrap_async_context_manager(
            mcp_client(f"{again.url}/mcp", token, mode="legacy")
        ) as client,
    ):
        caller = McpCaller(portal=portal, client=client)
        wanted = [w.memory_id for w in writers.done if w.acknowledged < began][:20]
        found = caller.reply("taproot_recall", {"ids": wanted})
        assert sorted(m["id"] for m in found["results"]) == sorted(wanted)
        written = caller.reply(
            "taproot_remember",
            {"category": "episodic", "content": "Written after the restore.", "gist": "After"},
        )
        assert written["action"] == "created"
        recalled = caller.reply("taproot_recall", {"query": "garden log"})
        assert recalled["results"]
