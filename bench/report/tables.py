"""What every section of the report is made of: a Markdown table, milliseconds and store
sizes as figures, the databases' names, and a measure judged against its target."""

from collections.abc import Iterable, Sequence
from typing import Any


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    lines = [
        "| " + " | ".join(headers) + " |",
        "|" + "|".join("---" if i == 0 else "---:" for i in range(len(headers))) + "|",
    ]
    for row in rows:
        lines.append("| " + " | ".join("" if v is None else str(v) for v in row) + " |")
    return "\n".join(lines)


def ms(value: float | None) -> str:
    if value is None:
        return "–"
    if value >= 100:
        return f"{value:.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def size_label(size: int) -> str:
    return f"{size:,}"


def runs_by_backend(results: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    grouped: dict[str, list[dict[str, Any]]] = {}
    for run in results.get("service", []):
        grouped.setdefault(run["backend"], []).append(run)
    for runs in grouped.values():
        runs.sort(key=lambda r: r["size"])
    return grouped


BACKEND_LABELS = {"sqlite": "SQLite", "postgresql": "PostgreSQL"}


def median(run: dict[str, Any], name: str) -> float | None:
    for op in run["operations"]:
        if op["operation"] == name:
            found: float = op["median_ms"]
            return found
    return None


def verdict(value: float | None, target: float) -> str:
    if value is None:
        return "not measured"
    if value <= target:
        return f"met ({target / value:.1f}× headroom)" if value > 0 else "met"
    return f"**missed** ({value / target:.1f}× over)"


def verdict_at_least(value: float, floor: float) -> str:
    return "met" if value >= floor - 1e-9 else "**missed**"
