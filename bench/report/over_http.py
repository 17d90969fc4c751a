"""The sections of the runs over HTTP (bench.http_bench): latency, throughput, bursts and
the flood per database, where a call spends its time (bench.profiling), and many owners
over two workers (bench.many_users)."""

from typing import Any

from bench.report.tables import BACKEND_LABELS, ms, table


def http_section(results: dict[str, Any]) -> str:
    http = results.get("http")
    if not http:
        return "Not run."
    if http.get("unavailable"):
        return f"Not measured: {http['unavailable']}"
    parts = []
    rows = [
        (
            BACKEND_LABELS.get(r["backend"], r["backend"]),
            r["tool"],
            r["runs"],
            ms(r["median_ms"]),
            ms(r["p95_ms"]),
            ms(r.get("service_median_ms")),
            ms(r.get("overhead_ms")),
            ms(r.get("client_cpu_ms")),
        )
        for r in http.get("latency", [])
    ]
    parts.append(
        table(
            (
                "database",
                "tool call",
                "runs",
                "median ms",
                "p95 ms",
                "in process",
                "transport",
                "client CPU",
            ),
            rows,
        )
    )
    throughput = [
        (
            BACKEND_LABELS.get(r["backend"], r["backend"]),
            r.get("mix", "conversation"),
            r["workers"],
            r["clients"],
            f"{r['calls_per_second']:.0f}",
            ms(r["median_ms"]),
            ms(r["p95_ms"]),
            ms(r.get("p99_ms")),  # runs before it was kept have none
            r["errors"],
        )
        for r in http.get("throughput", [])
    ]
    if throughput:
        parts.append(
            table(
                (
                    "database",
                    "mix",
                    "workers",
                    "clients",
                    "calls/s",
                    "median ms",
                    "p95 ms",
                    "p99 ms",
                    "errors",
                ),
                throughput,
            )
        )
    bursts = [
        (
            BACKEND_LABELS.get(r["backend"], r["backend"]),
            r["workers"],
            r["calls"],
            r["failed"],
            ms(r["burst_median_ms"]),
            ms(r["burst_max_ms"]),
            ms(r["call_median_ms"]),
            ms(r["call_max_ms"]),
        )
        for r in http.get("bursts", [])
    ]
    if bursts:
        parts.append(
            table(
                (
                    "database",
                    "workers",
                    "calls",
                    "failed",
                    "burst median ms",
                    "burst max ms",
                    "call median ms",
                    "call max ms",
                ),
                bursts,
            )
        )
    flood = [
        (
            BACKEND_LABELS.get(r["backend"], r["backend"]),
            r["recalls"],
            ms(r["alone_median_ms"]),
            ms(r["flood_median_ms"]),
            f"{r['ratio']}×",
            ms(r["alone_max_ms"]),
            ms(r["flood_max_ms"]),
            f"{r['remembers']} ({r['remembers_failed']} failed)",
        )
        for r in http.get("flood", [])
    ]
    if flood:
        parts.append(
            "Another account's recall while one account sends 5 remembers of 20,000 emoji at "
            "a time (one worker):\n\n"
            + table(
                (
                    "database",
                    "recalls",
                    "median ms alone",
                    "median ms in the flood",
                    "ratio",
                    "max ms alone",
                    "max ms in the flood",
                    "remembers meanwhile",
                ),
                flood,
            )
        )
    return "\n\n".join(parts)


def profile_section(results: dict[str, Any]) -> str:
    """Where a recall by ids over HTTP spends its time, per database (bench.profiling)."""
    parts = []
    for found in results.get("http", {}).get("profiles", []):
        label = BACKEND_LABELS.get(found["backend"], found["backend"])
        if found.get("unavailable"):
            parts.append(f"{label}: not profiled ({found['unavailable']}).")
            continue
        parts.append(
            f"**{label}**, {found['operation']}: {found['calls']:,} calls, "
            f"{found['samples']:,} samples of the worker's Python work (py-spy; raw: "
            f"`{found['raw']}`).\n\n"
            + table(("cost", "share of the samples"), [(c, f"{p} %") for c, p in found["costs"]])
        )
    return "\n\n".join(parts) if parts else "Not profiled."


def many_users_section(results: dict[str, Any]) -> str:
    """Owners' calls at random over two workers (bench.many_users, issue 32 item 7)."""
    rows = results.get("many_users")
    if not rows:
        return "Not run."
    headers = ["backend", "owners × memories", "workers", "clients", "calls/s", "p50 ms"]
    headers += ["p99 ms", "errors", "RSS per worker (MB)", "load"]
    return table(
        headers,
        (
            [
                row["backend"],
                f"{row['owners']:,} × {row['memories_per_owner']:,}",
                row["workers"],
                row["clients"],
                row["calls_per_second"],
                ms(row["median_ms"]),
                ms(row["p99_ms"]),
                row["errors"],
                " / ".join(f"{mb:.0f}" for mb in row["worker_rss_mb"]),
                row["load_average"],
            ]
            for row in rows
        ),
    )
