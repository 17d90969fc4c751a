"""What a small import costs in a large store (issue 30, M-2): a one-line import into a
store of N memories, in a child process, on SQLite: its seconds, its peak resident size
and how much the database grew (the snapshot it keeps).

    .venv/bin/python -m bench.import_snapshot [--size 150000] [--work DIR]

The store is the bench's synthetic one, loaded in bulk (bench.loading) into a fresh
database; the import is `manage.py import_taproot` of a one-line plain list, run twice
(the second changes nothing: it says so and keeps no snapshot). Peak RSS comes from the
kernel (os.wait4's ru_maxrss).
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from bench.database import bench_environment

ROOT = Path(__file__).resolve().parent.parent
MB = 1024 * 1024


def build(database: Path, size: int) -> None:
    """In this process: migrate a fresh database and load the synthetic store into it."""
    from bench.database import analyze, checkpoint, setup_django

    setup_django(f"sqlite:///{database}")
    from bench.loading import ensure_users, load_bulk
    from bench.synthetic import generate_store

    store = generate_store(size=size, now=datetime(2026, 11, 1, tzinfo=UTC), other_users=0)
    users = ensure_users([store.owner])
    load_bulk(store.memories, users)
    analyze()
    checkpoint()


def database_bytes(database: Path) -> int:
    return sum(path.stat().st_size for path in (database, Path(f"{database}-wal")) if path.exists())


def timed_import(env: dict[str, str], path: Path) -> tuple[float, float, str]:
    """Seconds, peak RSS (MB) and first line of one import_taproot run."""
    started = time.perf_counter()
    child = subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "manage.py"),
            "import_taproot",
            str(path),
            "--user",
            "bench-user",
        ],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert child.stdout is not None
    output = child.stdout.read()
    _, status, usage = os.wait4(child.pid, 0)
    seconds = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"the import failed:\n{output}")
    return seconds, usage.ru_maxrss / 1024, output.strip().splitlines()[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=150_000, help="memories in the store")
    parser.add_argument("--work", type=Path, default=None, help="where the database goes")
    parser.add_argument(
        "--store",
        type=Path,
        default=None,
        help="a store built before (a copy of it is used; it is built there when missing)",
    )
    parser.add_argument("--build", type=Path, help=argparse.SUPPRESS)  # the child's part
    args = parser.parse_args()
    if args.build:
        build(args.build, args.size)
        return
    with tempfile.TemporaryDirectory(dir=args.work) as scratch:
        database = Path(scratch) / "store.sqlite3"
        pristine = args.store or Path(scratch) / "pristine.sqlite3"
        if not pristine.exists():
            print(f"Loading {args.size:,} memories ...", file=sys.stderr, flush=True)
            subprocess.run(
                [
                    *(sys.executable, "-m", "bench.import_snapshot"),
                    *("--size", str(args.size), "--build", str(pristine)),
                ],
                env={**os.environ, **bench_environment(f"sqlite:///{pristine}")},
                cwd=ROOT,
                check=True,
            )
        shutil.copyfile(pristine, database)
        env = {**os.environ, **bench_environment(f"sqlite:///{database}")}
        subprocess.run(
            [sys.executable, str(ROOT / "manage.py"), "migrate", "--verbosity", "0"],
            env=env,
            cwd=ROOT,
            check=True,
        )
        line = Path(scratch) / "one-line.md"
        line.write_text("- Prefers tea to coffee in the afternoon\n")
        print("| run | seconds | peak RSS (MB) | database grew (MB) | said |")
        print("|---|---:|---:|---:|---|")
        for run, text in (("first", "tea"), ("second", "coffee"), ("again", "coffee")):
            line.write_text(f"- Prefers {text} in the afternoon\n")
            before = database_bytes(database)
            seconds, peak, said = timed_import(env, line)
            grew = (database_bytes(database) - before) / MB
            print(f"| {run} | {seconds:.2f} | {peak:.0f} | {grew:.1f} | {said[:70]} |", flush=True)


if __name__ == "__main__":
    main()
