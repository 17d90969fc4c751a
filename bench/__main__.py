"""`python -m bench` (or `bench/run`): every benchmark, one command.

Quick profile (default): stores of 1,000 and 10,000 memories on SQLite and PostgreSQL,
LoCoMo retrieval quality, and the HTTP runs at 10,000. `--full` adds 100,000.
Writes bench/results/<timestamp>/results.json and results.md (and bench/results/latest.*).
"""

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench import report
from bench.cross_checks import cross_check, same_rankings
from bench.database import (
    DEFAULT_POSTGRES_URL,
    BenchDatabase,
    copy_database,
    drop,
    exists,
    postgres_database,
    postgres_reachable,
    recreate,
    sqlite_database,
)
from bench.machine import load_average, machine_facts
from bench.overrides import activation_overrides, sweep_overrides
from bench.shared import locomo_dev_split

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
CACHE = RESULTS / "cache"
# What a prepared store depends on: when any of these change, the cached store is rebuilt.
STORE_SOURCES = (
    "bench/synthetic.py",
    "bench/loading.py",
    "memories/recall/indexing.py",
    "memories/recall/ranking.py",
    "memories/recall/tokens.py",
    "memories/models/choices.py",
    "memories/models/memory.py",
    "memories/models/recall_index.py",
    "memories/recall/embedding.py",
    "memories/recall/semantic.py",
)
DEFAULT_LOCOMO = locomo_dev_split()
PROFILES = {"quick": (1_000, 10_000), "full": (1_000, 10_000, 100_000)}
# Seconds of measuring per operation and per throughput run: the quick profile trades
# some precision for a run of a few minutes; the figures in docs/ come from --full.
TIMING = {"quick": (1.0, 4.0), "full": (3.0, 8.0)}
HTTP_SIZE = 10_000
PARTS = ("service", "retrieval", "http")
# `retrieval` is the static LoCoMo run, its replay as real use and the context replay;
# `replay` alone is the replay (bench.replay), `static` alone the static run, `context`
# alone what reflect shows of what the conversations go on to ask (bench.context).
RETRIEVAL_RUNS = {
    "retrieval": ("static", "replay", "context"),
    "replay": ("replay",),
    "static": ("static",),
    "context": ("context",),
}


def log(message: str) -> None:
    print(f"[bench {datetime.now().astimezone():%H:%M:%S}] {message}", file=sys.stderr, flush=True)


def run_child(args: list[str], out: Path) -> dict[str, Any]:
    before = load_average()
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "bench.child", *args, "--out", str(out)], cwd=ROOT)
    if done.returncode != 0:
        raise SystemExit(f"bench.child {args[0]} failed (exit {done.returncode})")
    result: dict[str, Any] = json.loads(out.read_text())
    result["wall_seconds"] = round(time.perf_counter() - started, 1)
    result["load_average"] = {"before": before, "after": load_average()}
    return result


def store_embedder() -> str:
    """The embedder the stores' vectors are made by: TAPROOT_EMBEDDER, as the children read it."""
    return os.environ.get("TAPROOT_EMBEDDER", "wordllama").strip() or "wordllama"


def store_key(size: int, seed: int) -> str:
    digest = hashlib.sha256(f"{size}:{seed}:{store_embedder()}".encode())
    migrations = sorted((ROOT / "memories" / "migrations").glob("*.py"))
    for path in [*(ROOT / name for name in STORE_SOURCES), *migrations]:
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def prepared_store(
    backend: str, size: int, args: argparse.Namespace, work: BenchDatabase
) -> dict[str, Any]:
    """Copy a ready store into `work`, building (and caching) it first when needed.

    Loading 10,000 memories takes a while; the prepared database is kept in
    bench/results/cache (SQLite) or as a `<base>_cache_<size>` database (PostgreSQL) and
    reused while the code that shapes its rows is unchanged.
    """
    CACHE.mkdir(parents=True, exist_ok=True)
    name = f"{backend}-{size}-seed{args.seed}"
    suffix = f"cache_{size}_seed{args.seed}"
    if store_embedder() != "wordllama":  # each embedder's vectors in a store of its own
        name += f"-{_slug(store_embedder())}"
        suffix += f"_{_slug(store_embedder()).replace('-', '_')}"
    if backend == "sqlite":
        cached = sqlite_database(CACHE, name)
    else:
        cached = postgres_database(args.postgres_url, suffix)
    meta_path = CACHE / f"{name}.json"
    key = store_key(size, args.seed)
    meta = json.loads(meta_path.read_text()) if meta_path.exists() else None
    if args.fresh or meta is None or meta.get("key") != key or not exists(cached):
        recreate(cached)
        log(f"preparing a store of {size:,} memories on {cached.label} (cached for next time)")
        meta = run_child(
            [
                "prepare",
                "--database-url",
                cached.url,
                "--size",
                str(size),
                "--seed",
                str(args.seed),
            ],
            CACHE / f"{name}.prepare.json",
        )
        meta["key"] = key
        meta_path.write_text(json.dumps(meta, indent=2) + "\n")
    copy_database(cached, work)
    return meta


def _slug(name: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in name).strip("-")


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--full", action="store_true", help="add the 100,000-memory store")
    parser.add_argument("--sizes", help="comma-separated store sizes (overrides the profile)")
    parser.add_argument("--backends", default="sqlite,postgres", help="sqlite and/or postgres")
    parser.add_argument(
        "--postgres-url",
        default=os.environ.get("TAPROOT_BENCH_POSTGRES_URL", DEFAULT_POSTGRES_URL),
        help="server and base name for the bench databases (default %(default)s)",
    )
    parser.add_argument("--locomo", type=Path, default=DEFAULT_LOCOMO, help="LoCoMo-format file")
    parser.add_argument(
        "--parts",
        default=",".join(PARTS),
        help="service, retrieval (or replay, static or context alone), http, many-users "
        "(not in the default: it loads --owners × --memories-per-owner memories)",
    )
    parser.add_argument(
        "--activation",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="retrieval: override a ranking constant (memories.recall.ranking.ActivationConfig), "
        "e.g. --activation history_weight=0.2; repeatable",
    )
    parser.add_argument(
        "--sweep",
        action="append",
        default=[],
        metavar="NAME=V1,V2,…",
        help="static retrieval: rank the same stores again with every combination of these "
        "ranking constants, e.g. --sweep meaning_floor=350,400 --sweep "
        "lexical_share/semantic_share=0.7/0.3,0.5/0.5 (names joined by / move together; each "
        "combination reported as a system of its own); repeatable",
    )
    parser.add_argument(
        "--systems",
        help="retrieval: only these of Taproot's rankings (';'-separated names, e.g. "
        "'Taproot, MiniLM'); default every one installed",
    )
    parser.add_argument(
        "--only",
        help="service part: only operations whose name contains one of these (comma-separated)",
    )
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--budget", type=float, help="seconds per operation (quick profile 1, full 3)"
    )
    parser.add_argument("--max-runs", type=int, default=300)
    parser.add_argument(
        "--seconds", type=float, help="seconds per throughput run (quick profile 4, full 8)"
    )
    parser.add_argument("--http-size", type=int, default=HTTP_SIZE, help="store size over HTTP")
    parser.add_argument("--owners", type=int, default=1000, help="many-users: owners")
    parser.add_argument(
        "--memories-per-owner", type=int, default=1000, help="many-users: each owner's memories"
    )
    parser.add_argument("--out", type=Path, help="results folder (default bench/results/<time>)")
    parser.add_argument("--keep-databases", action="store_true")
    parser.add_argument("--fresh", action="store_true", help="rebuild the cached stores")
    parser.add_argument("--profile", help="profile operations whose name contains this")
    return parser.parse_args(argv)


def main(argv: list[str]) -> None:
    args = parse_args(argv)
    profile = _apply_profile(args)
    sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else list(PROFILES[profile])
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    out_dir = args.out or RESULTS / stamp
    out_dir.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="taproot-bench-"))
    results: dict[str, Any] = {
        "profile": profile,
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": " ".join(["python -m bench", *argv]),
        "seconds_per_operation": args.budget,
        "seconds_per_throughput_run": args.seconds,
        "machine": machine_facts(args.postgres_url),
        "service": [],
        "notes": [],
    }
    if "postgres" in backends:
        reason = postgres_reachable(args.postgres_url)
        if reason:
            backends.remove("postgres")
            results["notes"].append(f"PostgreSQL skipped: {reason}")
            log(f"PostgreSQL not reachable ({reason}); measuring SQLite only")

    # The stores kept for the HTTP part, by backend.
    databases: dict[str, BenchDatabase] = {}

    def database(backend: str, name: str) -> BenchDatabase:
        if backend == "sqlite":
            return sqlite_database(workdir, name)
        return postgres_database(args.postgres_url, name)

    try:
        if "service" in parts:
            for backend in backends:
                for size in sizes:
                    db = database(backend, f"store_{size}")
                    results["service"].append(run_service(args, backend, size, db, out_dir))
                    if size == args.http_size and "http" in parts:
                        databases[backend] = db
                    elif not args.keep_databases:
                        drop(db)
        asked = {r for p in parts for r in RETRIEVAL_RUNS.get(p, ())}
        retrieval_runs: list[str] = [r for r in ("static", "replay") if r in asked]
        if retrieval_runs and (
            retrieval := run_retrieval(
                args, backends, database, out_dir, retrieval_runs, results["notes"]
            )
        ):
            results["retrieval"] = retrieval
        if "context" in asked and (
            context := run_context(args, backends, database, out_dir, results["notes"])
        ):
            results["context"] = context
        if "http" in parts:
            results["http"] = run_http(args, backends, databases, out_dir, results["service"])
        results["many_users"] = run_many_users(args, parts, backends, database)
    finally:
        for db in databases.values():
            if not args.keep_databases:
                drop(db)
        shutil.rmtree(workdir, ignore_errors=True)
    write_results(results, out_dir)


def _apply_profile(args: argparse.Namespace) -> str:
    """The profile's name; its timings fill in what the command line left unset."""
    profile = "full" if args.full else "quick"
    budget, seconds = TIMING[profile]
    args.budget = budget if args.budget is None else args.budget
    args.seconds = seconds if args.seconds is None else args.seconds
    return profile


def run_service(
    args: argparse.Namespace, backend: str, size: int, db: BenchDatabase, out_dir: Path
) -> dict[str, Any]:
    """Service-level latency on a store of `size` memories, prepared into `db`."""
    meta = prepared_store(backend, size, args, db)
    log(f"service latency: {db.label}, {size:,} memories")
    child_args = ["service", "--database-url", db.url, "--size", str(size)]
    child_args += ["--anchor", meta["anchor"]]
    child_args += ["--seed", str(args.seed), "--budget", str(args.budget)]
    child_args += ["--max-runs", str(args.max_runs)]
    if args.only:
        child_args += ["--only", args.only]
    if args.profile:
        child_args += ["--profile", args.profile]
    measured = run_child(child_args, out_dir / f"service-{backend}-{size}.json")
    facts = {k: v for k, v in meta.items() if k not in ("backend", "load_average")}
    measured["store"] = {**facts, **measured["store"]}
    return measured


def run_many_users(
    args: argparse.Namespace,
    parts: list[str],
    backends: list[str],
    database: Callable[[str, str], BenchDatabase],
) -> list[dict[str, Any]]:
    """bench.many_users on each backend when asked, on a database of its own (kept
    between runs with --keep-databases on PostgreSQL, so a second run loads nothing)."""
    rows: list[dict[str, Any]] = []
    for backend in backends if "many-users" in parts else []:
        db = database(backend, f"many_{args.owners}x{args.memories_per_owner}")
        if not (args.keep_databases and exists(db)):
            recreate(db)
        log(f"many users: {db.label}, {args.owners:,} owners × {args.memories_per_owner:,}")
        command = [sys.executable, "-m", "bench.many_users", "--database-url", db.url]
        command += ["--owners", str(args.owners), "--memories", str(args.memories_per_owner)]
        command += ["--seconds", str(args.seconds), "--seed", str(args.seed)]
        done = subprocess.run(command, cwd=ROOT, stdout=subprocess.PIPE, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"bench.many_users failed on {db.label}")
        rows += [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
        if not args.keep_databases:
            drop(db)
    return rows


def write_results(results: dict[str, Any], out_dir: Path) -> None:
    """results.json and results.md in `out_dir` and as bench/results/latest.*, each
    service profile in a file of its own; the markdown printed."""
    for run in results["service"]:
        for name, text in run.pop("profiles", {}).items():
            path = out_dir / f"profile-{run['backend']}-{run['size']}-{_slug(name)}.txt"
            path.write_text(text)
            results["notes"].append(
                f"profile of {name} ({run['backend']}, {run['size']:,}): {path}"
            )
    results["finished_at"] = datetime.now(UTC).isoformat(timespec="seconds")
    (out_dir / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    markdown = report.render(results)
    (out_dir / "results.md").write_text(markdown)
    RESULTS.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(out_dir / "results.json", RESULTS / "latest.json")
    shutil.copyfile(out_dir / "results.md", RESULTS / "latest.md")
    print(markdown)
    log(f"wrote {out_dir / 'results.json'} and {out_dir / 'results.md'}")


def run_retrieval(
    args: argparse.Namespace,
    backends: list[str],
    database: Callable[[str, str], BenchDatabase],
    out_dir: Path,
    runs: list[str],
    notes: list[str],
) -> dict[str, Any] | None:
    """LoCoMo on every database: the static run and/or its replay as real use."""
    if not args.locomo.exists():
        notes.append(f"LoCoMo data not found at {args.locomo}: not measured")
        return None
    activation = json.dumps(activation_overrides(args.activation))
    sweep = json.dumps(sweep_overrides(args.sweep))
    measured = {}
    for backend in backends:
        db = database(backend, "locomo")
        recreate(db)
        log(f"retrieval quality on LoCoMo ({' and '.join(runs)}): {db.label}")
        measured[backend] = run_child(
            ["retrieval", "--database-url", db.url, "--data", str(args.locomo),
             "--runs", ",".join(runs), "--activation", activation,
             "--systems", args.systems or "", "--sweep", sweep],
            out_dir / f"retrieval-{backend}" / "retrieval.json",
        )  # fmt: skip
        if not args.keep_databases:
            drop(db)
    first = measured[backends[0]]
    first["checks"] = cross_check(first, args.locomo)
    if len(measured) == 2:
        first["checks"].extend(same_rankings(measured))
    return first


def run_context(
    args: argparse.Namespace,
    backends: list[str],
    database: Callable[[str, str], BenchDatabase],
    out_dir: Path,
    notes: list[str],
) -> dict[str, Any] | None:
    """The context replay (bench.context) on the first database: reflect reads the same
    rows on either, and the replay is about what it shows, not how fast."""
    if not args.locomo.exists():
        notes.append(f"LoCoMo data not found at {args.locomo}: the context replay not run")
        return None
    db = database(backends[0], "context")
    recreate(db)
    log(f"what reflect shows on LoCoMo (context): {db.label}")
    measured = run_child(
        ["context", "--database-url", db.url, "--data", str(args.locomo)],
        out_dir / f"context-{backends[0]}.json",
    )
    if not args.keep_databases:
        drop(db)
    return measured


def run_http(
    args: argparse.Namespace,
    backends: list[str],
    databases: dict[str, BenchDatabase],
    out_dir: Path,
    service_runs: list[dict[str, Any]],
) -> dict[str, Any]:
    from bench.http_bench import unavailable_reason

    reason = unavailable_reason()
    if reason:
        log(f"HTTP part skipped: {reason}")
        return {"unavailable": reason}
    combined: dict[str, Any] = {"latency": [], "throughput": []}
    for backend in backends:
        db = databases.get(backend)
        if db is None:
            return {"unavailable": f"the HTTP part needs the service part at {args.http_size:,}"}
        log(f"over HTTP: {db.label}, {args.http_size:,} memories")
        child_args = ["http", "--database-url", db.url, "--size", str(args.http_size)]
        child_args += ["--seed", str(args.seed), "--budget", str(args.budget)]
        child_args += ["--max-runs", str(args.max_runs), "--seconds", str(args.seconds)]
        result = run_child(child_args, out_dir / f"http-{backend}.json")
        combined["client_mode"] = result["client_mode"]
        combined["latency"].extend(result["latency"])
        combined["throughput"].extend(result["throughput"])
        combined.setdefault("bursts", []).extend(result.get("bursts", []))
        combined.setdefault("flood", []).extend(result.get("flood", []))
        if "profile" in result:
            combined.setdefault("profiles", []).append(result["profile"])
    add_transport_overhead(combined, service_runs, args.http_size)
    return combined


def add_transport_overhead(
    http: dict[str, Any], service_runs: list[dict[str, Any]], size: int
) -> None:
    """HTTP median minus the in-process median of the same operation, same database."""
    for row in http["latency"]:
        run = next(
            (r for r in service_runs if r["backend"] == row["backend"] and r["size"] == size),
            None,
        )
        if run is None:
            continue
        op = next((o for o in run["operations"] if o["operation"] == row["tool"]), None)
        if op is not None:
            row["service_median_ms"] = op["median_ms"]
            row["overhead_ms"] = round(row["median_ms"] - op["median_ms"], 3)


if __name__ == "__main__":
    main(sys.argv[1:])
