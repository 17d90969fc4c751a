"""What a results document says of where it was measured: the machine, the database
and library versions, the commit, and the load while a part ran."""

import os
import platform
import sqlite3
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _memory_gb() -> str:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                return f"{int(line.split()[1]) / 1024 / 1024:.1f} GB"
    except OSError:
        pass
    return "unknown"


def _postgres_version(url: str) -> str:
    import psycopg

    try:
        with psycopg.connect(url.replace("postgres://", "postgresql://", 1).rsplit("/", 1)[0]
                             + "/postgres", connect_timeout=3) as conn:  # fmt: skip
            row = conn.execute("SHOW server_version").fetchone()
            return str(row[0]) if row else "unknown"
    except psycopg.Error:
        return "not reachable"


def _git_commit() -> str:
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=ROOT,
            capture_output=True,
            text=True,
        ).stdout.strip()
        return f"{head}{' (with uncommitted changes)' if dirty else ''}"
    except OSError:
        return "unknown"


def machine_facts(postgres_url: str) -> dict[str, str]:
    import django

    return {
        "CPU": _cpu_model(),
        "cores": str(os.cpu_count()),
        "memory": _memory_gb(),
        "OS": platform.platform(),
        "Python": platform.python_version(),
        "Django": django.get_version(),
        "SQLite": sqlite3.sqlite_version,
        "PostgreSQL": _postgres_version(postgres_url),
        "commit": _git_commit(),
    }


def load_average() -> float:
    return round(os.getloadavg()[0], 2)
