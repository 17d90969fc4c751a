"""Many users (issue 32, item 7): a thousand owners with a thousand memories each, served
by two workers, each call by a random owner: throughput, p50, p99 and each worker's RSS.

Every owner holds a copy of one synthetic store (bench.synthetic) under ids of its own:
the first owner's goes in through the bulk loader (bench.loading), and the others are
copied from it in SQL (bench.owner_copies), so a thousand owners load in minutes. The
calls are 3-word recalls of middle-band words (http_bench's "recall" mix), the call whose
cost follows the owner's store, each on a session of its owner's token opened at its
first call.

    .venv/bin/python -m bench.many_users --database-url URL [--owners 1000]
        [--memories 1000] [--workers 2] [--clients 4 16] [--seconds 20] [--no-load | --load-only]

Progress goes to a terminal; without one, only the results (JSON lines) are printed.
"""

import argparse
import asyncio
import dataclasses
import json
import os
import random
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import AsyncExitStack, contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.database import analyze, checkpoint, setup_django
from bench.queries import query_pools
from bench.synthetic import SyntheticMemory, generate_store
from bench.timing import summarise

PREFIX = "many-"
# The ids of an owner's copy of the store: a name of the owner and the template's id.
NAMESPACE = uuid.UUID("6f1c9a52-3d0e-4e8b-9a57-32c0ffee0032")
# Owners copied in one transaction (bench.owner_copies).
COPY_BATCH = 25


def owner_names(count: int) -> list[str]:
    return [f"{PREFIX}{n:04d}" for n in range(1, count + 1)]


def owner_copy(template: Sequence[SyntheticMemory], owner: str) -> list[SyntheticMemory]:
    """The template's memories as `owner`'s, under ids of their own (links follow)."""
    ids = {m.id: uuid.uuid5(NAMESPACE, f"{owner}/{m.id}") for m in template}
    return [
        dataclasses.replace(
            m,
            id=ids[m.id],
            owner=owner,
            linked_memories=tuple(ids[i] for i in m.linked_memories if i in ids),
        )
        for m in template
    ]


@contextmanager
def vectors_embedded_once() -> Iterator[None]:
    """While loading copies of one store, embed each text once: the bulk loader asks for a
    batch's vectors by text, and every owner's batch holds the same texts."""
    from bench import loading
    from memories.conf import embedder
    from memories.recall import Vectors, embedding_text

    original = getattr(loading, "vectors_for")  # noqa: B009 (put back below)
    semantic = embedder()
    known: dict[str, Any] = {}

    def vectors_for(rows: Sequence[Any]) -> Vectors | None:
        if semantic is None:
            return None
        texts = {embedding_text(row) for row in rows} - known.keys()
        if texts:
            ordered = sorted(texts, key=lambda text: (-len(text), text))
            known.update(zip(ordered, semantic.embed(ordered), strict=True))
        return Vectors(semantic, known)

    setattr(loading, "vectors_for", vectors_for)  # noqa: B010 (the bulk loader's own name)
    try:
        yield
    finally:
        setattr(loading, "vectors_for", original)  # noqa: B010


def load(
    owners: Sequence[str],
    template: Sequence[SyntheticMemory],
    progress: Callable[[str], None],
    *,
    batch: int = COPY_BATCH,
) -> None:
    """Each owner's copy of the template; owners already loaded are kept. The first owner's
    goes in through the bulk loader, the others are copied from it in SQL (a batch of
    owners at a time): the same rows the bulk loader would write for them, ids included."""
    from django.contrib.auth import get_user_model

    from bench.loading import ensure_users, load_bulk
    from bench.owner_copies import copy_owner

    present = set(
        get_user_model()
        .objects.filter(username__in=owners, memories__isnull=False)
        .values_list("username", flat=True)
        .distinct()
    )
    missing = [name for name in owners if name not in present]
    if not missing:
        return
    started = time.perf_counter()
    source = owners[0]
    if source in missing:
        with vectors_embedded_once():
            load_bulk(owner_copy(template, source), ensure_users([source]))
        missing.remove(source)
        progress(f"loaded {source} in bulk ({time.perf_counter() - started:.1f} s)")
    source_ids = [m.id for m in owner_copy(template, source)]
    source_id = ensure_users([source])[source].pk
    for start in range(0, len(missing), batch):
        names = missing[start : start + batch]
        users = ensure_users(names)
        copy_owner(
            source_id,
            {
                users[name].pk: dict(
                    zip(source_ids, (m.id for m in owner_copy(template, name)), strict=True)
                )
                for name in names
            },
        )
        done = start + len(names)
        rate = done / (time.perf_counter() - started)
        progress(f"copied {done}/{len(missing)} owners ({rate:.1f} owners/s)")
    progress("analysing")
    analyze()
    checkpoint()


def quick_application_secrets() -> None:
    """A token is issued for an application of its owner's, made at the owner's first token
    with a hashed client secret: PBKDF2's iterations took about 0.7 s an owner here (12
    minutes for a thousand). The bench's applications are never authenticated by their
    secret, so this process hashes the secrets of those it makes with a quick hasher."""
    from django.conf import settings

    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def worker_rss_mb(port: int) -> list[float]:
    """Resident memory (MB) of each of uvicorn's workers serving on the port: the
    processes holding its listening socket whose parent holds it too."""
    holders = _holders(_listening_inode(port))
    return sorted(rss_mb(pid) for pid in holders if _parent(pid) in holders)


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    raise ValueError(f"process {pid} reports no VmRSS")


async def throughput(
    url: str,
    tokens: dict[str, str],
    queries: Sequence[str],
    *,
    clients: int,
    seconds: float,
    seed: int,
    measured: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """`clients` callers back to back for `seconds` after a warm-up, each call a recall of
    a random owner on that owner's session (all of them opened first, untimed, in this
    task: the client library's sessions are closed by the task that opened them). The
    figures go into `measured` as soon as they are taken."""
    from bench.serving import open_client

    measured = {} if measured is None else measured
    rng = random.Random(f"taproot-bench-many-{seed}-{clients}")
    owners = sorted(tokens)
    samples: list[float] = []
    errors = 0
    measuring = False
    stop_at = 0.0

    async def one_client(sessions: dict[str, Any]) -> None:
        nonlocal errors
        while True:
            client = sessions[rng.choice(owners)]
            call = {"query": rng.choice(queries)}
            started = time.perf_counter()
            try:
                ok = not (await client.call_tool("taproot_recall", call)).is_error
            except Exception:
                ok = False
            finished = time.perf_counter()
            if measuring and finished > stop_at:
                return
            if measuring:
                samples.append((finished - started) * 1000)
                errors += not ok

    stack = AsyncExitStack()
    try:
        sessions = {owner: await open_client(stack, url, tokens[owner]) for owner in owners}
        tasks = [asyncio.create_task(one_client(sessions)) for _ in range(clients)]
        await asyncio.sleep(min(5.0, seconds / 4))  # warm-up
        started = time.perf_counter()
        stop_at = started + seconds
        measuring = True
        await asyncio.gather(*tasks)
        elapsed = time.perf_counter() - started
        summary = summarise(samples) if samples else None
        measured.update(
            clients=clients,
            seconds=round(elapsed, 2),
            calls=len(samples),
            calls_per_second=round(len(samples) / seconds, 1),
            errors=errors,
            median_ms=summary.median_ms if summary else None,
            p99_ms=summary.p99_ms if summary else None,
        )
    finally:
        # Closing a thousand sessions failed at times (an error nested past what Python
        # shows, then a cancellation of this task by a session's cancel scope) after the
        # calls were all timed: what was measured stands, in `measured`.
        measured["sessions_closed"] = await _closed(stack)
    return measured


async def _closed(stack: AsyncExitStack) -> bool:
    """Whether the sessions closed without an error."""
    try:
        await stack.aclose()
    except (Exception, asyncio.CancelledError) as exc:  # a session's own cancel scope
        print(f"closing the sessions: {exc!r}", file=sys.stderr)
        return False
    return True


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.many_users", description=__doc__)
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--owners", type=int, default=1000)
    parser.add_argument("--memories", type=int, default=1000, help="memories per owner")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--clients", type=int, nargs="+", default=[4, 16])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--no-load", action="store_true", help="the owners are loaded already")
    parser.add_argument("--load-only", action="store_true", help="load the owners, measure nothing")
    args = parser.parse_args(argv)
    if args.owners < 1 or args.memories < 10:
        parser.error("--owners must be at least 1 and --memories at least 10")

    def progress(message: str) -> None:
        if sys.stderr.isatty():
            print(f"[many-users {datetime.now(UTC):%H:%M:%S}] {message}", file=sys.stderr)

    from bench.serving import free_port, issue_token, public_url, uvicorn_server

    port = free_port()
    os.environ["TAPROOT_PUBLIC_URL"] = public_url(port)
    setup_django(args.database_url)
    from django.db import connection

    backend = connection.vendor
    store = generate_store(size=args.memories, now=datetime.now(UTC), seed=args.seed, other_users=0)
    template = store.of(store.owner)
    owners = owner_names(args.owners)
    if not args.no_load:
        load(owners, template, progress)
    if args.load_only:
        return
    progress(f"issuing {len(owners)} tokens")
    quick_application_secrets()
    tokens = {name: issue_token(name) for name in owners}
    queries = [query_pools(template, seed=args.seed).pick("middle", 3, i) for i in range(60)]
    connection.close()
    with uvicorn_server(args.database_url, port, args.workers) as url:
        for clients in args.clients:
            progress(f"{clients} clients for {args.seconds:g} s")
            row: dict[str, Any] = {}
            try:
                asyncio.run(
                    throughput(
                        url,
                        tokens,
                        queries,
                        clients=clients,
                        seconds=args.seconds,
                        seed=args.seed,
                        measured=row,
                    )
                )
            except (Exception, asyncio.CancelledError):
                if "calls" not in row:
                    raise
                row["sessions_closed"] = False
            row = {
                "backend": backend,
                "owners": args.owners,
                "memories_per_owner": args.memories,
                "workers": args.workers,
                **row,
                "worker_rss_mb": worker_rss_mb(port),
                "load_average": round(os.getloadavg()[0], 2),
            }
            print(json.dumps(row), flush=True)


def _holders(inode: str) -> set[int]:
    """The processes (of this user) holding this socket open."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and f"socket:[{inode}]" in _open_files(entry):
            found.add(int(entry.name))
    return found


def _open_files(process: Path) -> set[str]:
    """What a process's descriptors point at, as far as they can be read: a process that
    ended, or a descriptor closed while listed (another thread's), is passed over, not
    the whole process."""
    try:
        descriptors = list((process / "fd").iterdir())
    except OSError:
        return set()
    targets = set()
    for descriptor in descriptors:
        try:
            targets.add(os.readlink(descriptor))
        except OSError:
            continue
    return targets


def _parent(pid: int) -> int:
    # The field after the command name, which is in parentheses and may hold spaces.
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def _listening_inode(port: int) -> str:
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if int(fields[1].split(":")[1], 16) == port and fields[3] == "0A":
            return fields[9]
    raise RuntimeError(f"nothing listens on port {port}")


if __name__ == "__main__":
    main(sys.argv[1:])
