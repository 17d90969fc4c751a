"""The fixed-cost bench's own parts: a server's CPU time, and a store copied for each server."""

import os
import sqlite3
import time
from pathlib import Path

import pytest

from bench import fixed_cost
from bench.database import sqlite_database


def test_cpu_seconds_count_what_the_process_computed():
    before = fixed_cost.cpu_seconds(os.getpid())
    deadline = time.process_time() + 0.3
    while time.process_time() < deadline:
        pass
    assert fixed_cost.cpu_seconds(os.getpid()) - before >= 0.2


@pytest.mark.django_db(transaction=True)
def test_each_server_gets_a_copy_of_the_store_of_its_own(monkeypatch, tmp_path: Path):
    monkeypatch.setattr(fixed_cost, "checkpoint", lambda: None)
    store = sqlite_database(tmp_path, "store")
    with sqlite3.connect(store.url[len("sqlite:///") :]) as made:
        made.execute("CREATE TABLE t (x INTEGER)")
        made.execute("INSERT INTO t VALUES (7)")
    copies = fixed_cost._copies(store, ["after", "before"])
    paths = {name: Path(copy.url[len("sqlite:///") :]) for name, copy in copies.items()}
    assert paths == {
        "after": tmp_path / "store_after.sqlite3",
        "before": tmp_path / "store_before.sqlite3",
    }
    with sqlite3.connect(paths["after"]) as after:
        after.execute("INSERT INTO t VALUES (8)")
    for name, expected in [("after", [7, 8]), ("before", [7])]:
        with sqlite3.connect(paths[name]) as copy:
            assert [x for (x,) in copy.execute("SELECT x FROM t ORDER BY x")] == expected
