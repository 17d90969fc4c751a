import socket
import subprocess
import sys
from datetime import UTC, datetime

import pytest

from bench.many_users import owner_copy, owner_names, rss_mb, vectors_embedded_once, worker_rss_mb
from bench.synthetic import OWNER, generate_store

NOW = datetime(2026, 11, 29, 12, 0, 0, tzinfo=UTC)


def test_owners_copies_hold_the_same_memories_under_ids_of_their_own() -> None:
    template = generate_store(size=200, now=NOW, seed=3, other_users=0).of(OWNER)
    first, second = (owner_copy(template, name) for name in owner_names(2))
    assert owner_names(2) == ["many-0001", "many-0002"]
    assert {m.owner for m in first} == {"many-0001"}
    ids = {m.id for m in first} | {m.id for m in second} | {m.id for m in template}
    assert len(ids) == 3 * len(template)
    assert [m.content for m in first] == [m.content for m in template]
    # Links point at the owner's own copies, as the template's point at its memories.
    first_ids = {m.id for m in first}
    linked = [i for m in first for i in m.linked_memories]
    assert linked and set(linked) <= first_ids
    assert [len(m.linked_memories) for m in first] == [len(m.linked_memories) for m in template]
    assert owner_copy(template, "many-0001") == first


@pytest.mark.django_db
def test_the_loader_embeds_each_text_once_across_owners(settings) -> None:
    from bench import loading
    from memories.conf import embedder

    if embedder() is None:
        pytest.skip("recall uses no embedder here")
    template = generate_store(size=30, now=NOW, seed=3, other_users=0).of(OWNER)
    rows = [loading.memory_row(m, None) for m in owner_copy(template, "many-0001")]
    again = [loading.memory_row(m, None) for m in owner_copy(template, "many-0002")]
    original = loading.vectors_for
    with vectors_embedded_once():
        first = loading.vectors_for(rows)
        semantic = first.embedder if first is not None else None
        assert semantic is not None
        calls: list[int] = []
        embed = semantic.embed
        try:
            semantic.embed = lambda texts: calls.append(len(texts)) or embed(texts)  # type: ignore[method-assign]
            second = loading.vectors_for(again)
        finally:
            del semantic.embed
        assert calls == []
        assert second is not None
        assert set(second.by_text) == {loading.embedding_text(row) for row in again}
    assert loading.vectors_for is original


def test_worker_rss_is_read_for_each_child_holding_the_listening_socket() -> None:
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        port = listening.getsockname()[1]
        child = subprocess.Popen(
            [sys.executable, "-c", "import time; time.sleep(30)"], pass_fds=[listening.fileno()]
        )
        try:
            sizes = worker_rss_mb(port)
            assert len(sizes) == 1
            assert 0 < sizes[0] == pytest.approx(rss_mb(child.pid), abs=5)
        finally:
            child.kill()
            child.wait()


def test_the_report_shows_each_many_users_run() -> None:
    from bench.report.over_http import many_users_section

    row = {
        "backend": "postgresql",
        "owners": 1000,
        "memories_per_owner": 1000,
        "workers": 2,
        "clients": 16,
        "calls_per_second": 61.5,
        "median_ms": 180.25,
        "p99_ms": 512.0,
        "errors": 0,
        "worker_rss_mb": [301.4, 288.6],
        "load_average": 3.1,
    }
    assert many_users_section({}) == "Not run."
    lines = many_users_section({"many_users": [row]}).splitlines()
    assert (
        lines[2]
        == "| postgresql | 1,000 × 1,000 | 2 | 16 | 61.5 | 180 | 512 | 0 | 301 / 289 | 3.1 |"
    )
