"""How long a whole-database backup and its restore take, as an operator runs them.

    .venv/bin/python -m bench.backups [--size 10000] [--runs 3] [--backends sqlite,postgres]

Loads the benchmark's synthetic store (bench.synthetic, in bulk) into a scratch database
of each kind, then times `manage.py backup_taproot` on it and `manage.py restore_taproot`
of that backup into a new, empty database, each as its own process (Django's start-up
included, as in cron), and prints a markdown table: the median and fastest of the runs,
and the size of the backup file.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from bench.database import (
    DEFAULT_POSTGRES_URL,
    BenchDatabase,
    bench_environment,
    drop,
    postgres_database,
    recreate,
    setup_django,
    sqlite_database,
)

ROOT = Path(__file__).resolve().parent.parent


def load(url: str, size: int) -> None:
    """In a child process: migrate the database and load the synthetic store into it."""
    setup_django(url)
    from bench.loading import ensure_users, load_bulk
    from bench.synthetic import generate_store

    store = generate_store(size=size, now=datetime.now(UTC))
    users = ensure_users([store.owner, *store.others])
    load_bulk(store.memories, users)


def timed(args: list[str], database: BenchDatabase) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env={**os.environ, **bench_environment(database.url)},
        capture_output=True,
        text=True,
        check=False,
    )
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed on {database.label}:\n{done.stderr}")
    return elapsed, done.stdout


def measure(database: BenchDatabase, target: BenchDatabase, *, size: int, runs: int) -> str:
    recreate(database)
    subprocess.run(
        [sys.executable, "-m", "bench.backups", "--load", database.url, "--size", str(size)],
        cwd=ROOT,
        check=True,
    )
    backups, restores, sizes, notes = [], [], [], set()
    with tempfile.TemporaryDirectory() as folder:
        for run in range(runs):
            output = Path(folder) / str(run)
            elapsed, _ = timed(["backup_taproot", "--output", str(output)], database)
            backups.append(elapsed)
            made = next(output.glob("taproot-*.tar"))
            sizes.append(made.stat().st_size)
            recreate(target)
            elapsed, said = timed(["restore_taproot", str(made)], target)
            restores.append(elapsed)
            if "Rebuilding the recall index" in said:
                notes.add("the restore rebuilt the recall index")
    drop(target)
    drop(database)
    megabytes = statistics.median(sizes) / 1024 / 1024
    note = f" ({'; '.join(sorted(notes))})" if notes else ""
    return (
        f"| {database.label} | {statistics.median(backups):.2f} s ({min(backups):.2f}) "
        f"| {statistics.median(restores):.2f} s ({min(restores):.2f}) "
        f"| {megabytes:.1f} MB |{note}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=10_000, help="memories of the main user")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--postgres-url", default=DEFAULT_POSTGRES_URL)
    parser.add_argument("--load", help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.load:
        load(options.load, options.size)
        return
    lines = [
        f"Store: {options.size:,} memories (and the synthetic store's neighbours); "
        f"{options.runs} runs, median (fastest).",
        "",
        "| database | backup_taproot | restore_taproot | backup file |",
        "|---|---:|---:|---:|",
    ]
    with tempfile.TemporaryDirectory() as scratch:
        for backend in options.backends.split(","):
            if backend == "sqlite":
                source = sqlite_database(Path(scratch), "backup_source")
                target = sqlite_database(Path(scratch), "backup_target")
            else:
                source = postgres_database(options.postgres_url, "backup_source")
                target = postgres_database(options.postgres_url, "backup_target")
            lines.append(measure(source, target, size=options.size, runs=options.runs))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
