"""One measurement on one database, in its own process (`python -m bench.child …`).

The orchestrator (`python -m bench`) starts one of these per database and size, so each
gets a fresh Django set up on its own DATABASE_URL. Results go to `--out` as JSON.
"""

import argparse
import json
import os
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.database import setup_django


def _service(args: argparse.Namespace) -> dict[str, Any]:
    from bench import service_bench
    from bench.timing import RunPlan

    plan = RunPlan(
        warmup=args.warmup, min_runs=args.min_runs, max_runs=args.max_runs, budget_s=args.budget
    )
    return service_bench.run(
        size=args.size,
        seed=args.seed,
        plan=plan,
        only=args.only,
        profile_names=args.profile,
        anchor=datetime.fromisoformat(args.anchor),
    )


def _prepare(args: argparse.Namespace) -> dict[str, Any]:
    from bench import service_bench

    return service_bench.prepare_store(args.size, args.seed, datetime.now(UTC))


def _retrieval(args: argparse.Namespace) -> dict[str, Any]:
    from django.test import override_settings

    from bench import retrieval

    activation = json.loads(args.activation)
    with override_settings(TAPROOT_ACTIVATION=activation):
        report = retrieval.run(
            data_path=args.data,
            out_dir=args.out.parent,
            static="static" in args.runs,
            replay="replay" in args.runs,
            rankings=[name for name in args.systems.split(";") if name] or None,
            sweep=json.loads(args.sweep),
        )
    return {"activation": activation, **report} if activation else report


def _context(args: argparse.Namespace) -> dict[str, Any]:
    from bench import context

    return context.run(data_path=args.data)


def _http(args: argparse.Namespace) -> dict[str, Any]:
    from bench import http_bench
    from bench.timing import RunPlan

    plan = RunPlan(warmup=5, min_runs=args.min_runs, max_runs=args.max_runs, budget_s=args.budget)
    return http_bench.run(
        database_url=args.database_url,
        size=args.size,
        seed=args.seed,
        plan=plan,
        seconds=args.seconds,
        profile_dir=args.out.parent,
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.child")
    sub = parser.add_subparsers(dest="command", required=True)
    service = sub.add_parser("service", help="service-level latency on a synthetic store")
    service.add_argument("--size", type=int, required=True)
    service.add_argument("--seed", type=int, default=7)
    service.add_argument("--warmup", type=int, default=5)
    service.add_argument("--min-runs", type=int, default=30)
    service.add_argument("--max-runs", type=int, default=300)
    service.add_argument("--budget", type=float, default=3.0, help="seconds per operation")
    service.add_argument("--only", help="run only operations whose name contains this")
    service.add_argument("--profile", help="also profile operations whose name contains this")
    service.add_argument("--anchor", required=True, help="when the store was prepared (ISO)")
    prepare = sub.add_parser("prepare", help="write a synthetic store into an empty database")
    prepare.add_argument("--size", type=int, required=True)
    prepare.add_argument("--seed", type=int, default=7)
    quality = sub.add_parser("retrieval", help="LoCoMo retrieval quality")
    quality.add_argument("--data", type=Path, required=True, help="a LoCoMo-format JSON file")
    quality.add_argument("--runs", default="static,replay", help="static and/or replay")
    quality.add_argument(
        "--activation", default="{}", help="TAPROOT_ACTIVATION overrides, as a JSON object"
    )
    quality.add_argument("--systems", default="", help="rankings to run, ';'-separated")
    quality.add_argument("--sweep", default="[]", help="constants to rank with too, JSON list")
    seen = sub.add_parser("context", help="what reflect shows of what LoCoMo goes on to ask")
    seen.add_argument("--data", type=Path, required=True, help="a LoCoMo-format JSON file")
    http = sub.add_parser("http", help="MCP tool calls over HTTP against uvicorn")
    http.add_argument("--size", type=int, required=True)
    http.add_argument("--seed", type=int, default=7)
    http.add_argument("--min-runs", type=int, default=30)
    http.add_argument("--max-runs", type=int, default=300)
    http.add_argument("--budget", type=float, default=3.0, help="seconds per tool")
    http.add_argument("--seconds", type=float, default=8.0, help="per throughput run")
    for sp in (service, prepare, quality, seen, http):
        sp.add_argument("--database-url", required=True)
        sp.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)

    if args.command == "http":
        from bench.serving import free_port, public_url

        # The token is bound to the server's public URL, so both must agree on the port.
        port = free_port()
        os.environ["TAPROOT_BENCH_PORT"] = str(port)
        os.environ["TAPROOT_PUBLIC_URL"] = public_url(port)
    setup_django(args.database_url)
    from django.db import connection

    measure = {
        "service": _service,
        "prepare": _prepare,
        "retrieval": _retrieval,
        "context": _context,
        "http": _http,
    }[args.command]
    result = {"backend": connection.vendor, **measure(args)}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
