"""Reflect and status on a store whose core tier is small, in process.

The synthetic stores make 2 % of their memories core whatever their size: 2,001 core
memories at 100,000, of which a payload of the default budget can show about 200, as
lines. A person's core tier is what Claude loads at every start, so it stays near what fits
the budget however many memories there are. This measures both: a copy of a cached store as
it is, and the same copy with all but its `--keep` most recently touched core memories made
non-core (the kept counts follow, by their triggers). The service part of `python -m bench`
measures the store as it is; this does not replace it.

    .venv/bin/python -m bench.small_core --store bench/results/cache/sqlite-100000-seed7.sqlite3
"""

import argparse
import json
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.database import analyze, setup_django


def _median_ms(call: Callable[[], object], runs: int) -> float:
    call()
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        call()
        times.append((time.perf_counter() - started) * 1000)
    return round(statistics.median(times), 1)


def _measure(runs: int) -> dict[str, Any]:
    from mcp_bridge import handlers
    from memories import services
    from memories.models import Memory, User

    owner = User.objects.get(username="bench-user")
    payload = services.reflect(owner=owner)
    return {
        "core": Memory.objects.filter(owner=owner, core=True, archived_at__isnull=True).count(),
        "core_in_full": len(payload.core_full),
        "core_as_lines": len(payload.core_lines),
        "catalog_lines": payload.payload.get("catalog_count", 0),
        "reflect_ms": _median_ms(lambda: services.reflect(owner=owner), runs),
        "status_ms": _median_ms(lambda: handlers.status(owner=owner), runs),
    }


def keep_core(owner: Any, keep: int) -> None:
    """Make all but the owner's `keep` most recently touched live core memories non-core."""
    from memories.models import Memory

    core = Memory.objects.filter(owner=owner, core=True, archived_at__isnull=True)
    kept = list(core.order_by("-last_touched_at", "id").values_list("id", flat=True)[:keep])
    core.exclude(pk__in=kept).update(core=False)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.small_core", description=__doc__)
    parser.add_argument("--store", required=True, help="a cached SQLite store (copied first)")
    parser.add_argument("--keep", type=int, default=20, help="core memories kept")
    parser.add_argument("--runs", type=int, default=40)
    args = parser.parse_args()
    source = Path(args.store)
    meta = json.loads(source.with_suffix(".json").read_text())
    with tempfile.TemporaryDirectory(prefix="taproot-small-core-") as work:
        copy = Path(work) / "store.sqlite3"
        shutil.copyfile(source, copy)
        setup_django(f"sqlite:///{copy}")
        from bench.service_bench import move_to_now

        move_to_now(datetime.fromisoformat(meta["anchor"]), datetime.now(UTC))
        analyze()
        results = {"as prepared": _measure(args.runs)}
        from memories.models import User

        keep_core(User.objects.get(username="bench-user"), args.keep)
        analyze()
        results[f"core cut to {args.keep}"] = _measure(args.runs)
    print(json.dumps({"store": str(source), **results}, indent=2))


if __name__ == "__main__":
    main()
