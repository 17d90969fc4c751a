"""Where a call over HTTP spends the server's time: a sampling profile of the uvicorn
worker (py-spy), summed into the costs the per-call work is made of.

py-spy samples, a few hundred times a second, the stack of whichever thread holds the
interpreter lock: the Python work of the worker, on its event loop and its database
threads alike. (Sampling every thread that is not asleep instead counts a thread that
waits to take the lock back, after handing a result over, as if it worked, which on a
busy machine swells the hand-offs several times over.) Each sample is put in the first
cost whose mark appears in its stack (what the frame belongs to: the token check,
strengthening, the SDK…); samples no mark claims are put by the library of the frame
nearest their innermost one (pydantic, JSON, asyncio…). The shares are of the samples
taken while serving.
"""

import shutil
import sys
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

# (cost, marks): a sample belongs to the first cost one of whose marks its stack contains.
# A mark is a frame's function name with the opening of its location, as py-spy prints it.
COSTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("bearer-token lookup", ("find_access_token (", "DjangoTokenVerifier.verify_token (")),
    ("user lookup per tool call", ("token_user (",)),
    ("strengthening write", ("strengthen (memories/services/strengthening",)),
    ("recall: ranking", ("rank_memories (",)),
    ("recall: loading the memories and the reply", ("recall (memories/services/recall.py",)),
    ("other service work", ("memories/services/",)),
    (
        "opening or closing a database connection",
        ("get_new_connection (", "BaseDatabaseWrapper.close (", "BaseDatabaseWrapper._close ("),
    ),
    ("request signals", ("Signal.asend (", "close_old_connections (")),
    (
        "per-request thread set-up",
        ("ThreadSensitiveContext.", "ThreadPoolExecutor.__init__ (", "_adjust_thread_count ("),
    ),
)
# Costs named by the library of the frame nearest a sample's innermost one whose file
# they name, for samples no mark claims.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("pydantic", ("pydantic/", "pydantic_core/")),
    ("JSON", ("json/",)),
    ("MCP SDK", ("mcp/", "mcp_types/")),
    ("Starlette", ("starlette/",)),
    ("HTTP server (uvicorn, h11)", ("uvicorn/", "h11/", "httptools/")),
    (
        "event loop and thread hand-offs",
        ("asyncio/", "selectors.py", "anyio/", "asgiref/", "concurrent/", "threading.py"),
    ),
    ("Taproot's /mcp wrapper", ("taproot_site/", "mcp_bridge/")),
    ("Django (other)", ("django/",)),
    ("database driver", ("psycopg/", "psycopg_pool/", "sqlite3/")),
    ("logging", ("logging/",)),
)
# Innermost frames of a thread that waits for work rather than doing it.
IDLE = (
    ".select (selectors.py",
    "_worker (concurrent/futures/thread.py",
    "Condition.wait (threading.py",
    "Thread.join (threading.py",
    "Event.wait (threading.py",
)
# Stacks of the server starting up or stopping, not serving.
NOT_SERVING = (
    "Config.load_app (",
    "TaprootASGI.lifespan (",
    "_recall_index_problem (",
    "<frozen importlib._bootstrap",  # a module imported on first use
)


def py_spy() -> str | None:
    """The py-spy program (a development dependency), or None where it is missing."""
    beside = Path(sys.executable).with_name("py-spy")
    return str(beside) if beside.exists() else shutil.which("py-spy")


def record_command(output: Path, rate: int = 500) -> list[str]:
    """The start of a command line that runs what follows it under py-spy."""
    program = py_spy()
    if program is None:
        raise RuntimeError("py-spy is not installed")
    return [program, "record", "--gil", "--format", "raw", "--rate", str(rate),
            "--nonblocking", "--output", str(output), "--"]  # fmt: skip


def samples(collapsed: str) -> Iterable[tuple[list[str], int]]:
    """(frames outermost first, count) for each line of py-spy's raw (collapsed) output."""
    for line in collapsed.splitlines():
        stack, _, count = line.rstrip().rpartition(" ")
        if stack and count.isdigit():
            yield stack.split(";"), int(count)


def cost_of(frames: list[str]) -> str | None:
    """Which cost a sample belongs to; None for a thread waiting or the server not serving."""
    if not frames or any(mark in frames[-1] for mark in IDLE):
        return None
    stack = ";".join(frames)
    if any(mark in stack for mark in NOT_SERVING):
        return None
    for name, marks in COSTS:
        if any(mark in stack for mark in marks):
            return name
    for frame in reversed(frames):  # the library nearest the innermost frame
        for name, places in LAYERS:
            if any(f"({place}" in frame for place in places):
                return name
    return "other"


def summarise(collapsed: str, *, top: int = 12) -> dict[str, object]:
    """The busy samples of a profile, and the largest costs with their share of them (%)."""
    counts: Counter[str] = Counter()
    for frames, count in samples(collapsed):
        cost = cost_of(frames)
        if cost is not None:
            counts[cost] += count
    busy = sum(counts.values())
    shares = [[name, round(100 * n / busy, 1)] for name, n in counts.most_common(top)]
    return {"samples": busy, "costs": shares if busy else []}
