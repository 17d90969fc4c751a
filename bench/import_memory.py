"""How much memory an import takes (issue 22, item 5): the peak resident size of a
`manage.py import_taproot` process, for large generated files, against the bound of
300 MB + 4 × the file's size.

    .venv/bin/python -m bench.import_memory [--mb 32] [--work DIR] [--shapes a,b,…]

Each shape is written to a file, then imported by a child process into a fresh SQLite
database (migrated, with one account), and the child's peak RSS is read from the kernel
(os.wait4's ru_maxrss). The hostile shapes are the issue's: a 50 MB content, a million
tags, a 100,000-digit number, and the cheapest JSON per value (empty lists, which cost
Python about 20 times their bytes). "tiny" is a million-record-sized file of minimal
records, checked with --dry-run (the pass that holds what an import keeps between its two
reads); "realistic" is an export of memories of ordinary sizes, imported whole.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MB = 1024 * 1024
BOUND_BASE_MB = 300
BOUND_FACTOR = 4


def _record(index: int, content: str, **fields: object) -> str:
    return json.dumps(
        {
            "id": str(uuid.UUID(int=index + 1)),
            "category": "episodic",
            "content": content,
            "created_at": "2026-01-01T00:00:00Z",
            **fields,
        },
        ensure_ascii=False,
    )


def realistic(path: Path, mb: int) -> list[str]:
    """An export-like array of memories of ordinary sizes (a few hundred characters)."""
    words = [
        "garden",
        "book",
        "soil",
        "compost",
        "chapter",
        "Maya",
        "morning",
        "coffee",
        "notes",
        "draft",
        "café",
        "東京",
    ]
    with path.open("w", encoding="utf-8") as out:
        out.write("[")
        index = 0
        while out.tell() < mb * MB:
            text = " ".join(words[(index + i) % len(words)] for i in range(60 + index % 40))
            out.write(
                ("," if index else "")
                + _record(index, f"Memory {index}: {text}.", tags=["bench", f"t{index % 50}"])
            )
            index += 1
        out.write("]")
    return []


def tiny(path: Path, mb: int) -> list[str]:
    """As many minimal records as fit: the most records per byte."""
    with path.open("w", encoding="utf-8") as out:
        out.write("[")
        index = 0
        while out.tell() < mb * MB and index < 999_000:
            out.write(
                ("," if index else "") + f'{{"id":"{uuid.UUID(int=index + 1)}","content":"x"}}'
            )
            index += 1
        out.write("]")
    return ["--dry-run"]


def huge_content(path: Path, mb: int) -> list[str]:
    path.write_text("[" + _record(0, "x" * (50 * MB)) + "]", encoding="utf-8")
    return []


def million_tags(path: Path, mb: int) -> list[str]:
    tags = ",".join(f'"t{i}"' for i in range(1_000_000))
    path.write_text(f'[{_record(0, "x")[:-1]}, "tags": [{tags}]}}]', encoding="utf-8")
    return []


def empty_lists(path: Path, mb: int) -> list[str]:
    count = (mb * MB) // 3
    with path.open("w", encoding="utf-8") as out:
        out.write(f'[{_record(0, "x")[:-1]}, "extra": [')
        out.write(",".join(["[]"] * count))
        out.write("]}]")
    return []


def long_number(path: Path, mb: int) -> list[str]:
    path.write_text(f'[{_record(0, "x")[:-1]}, "n": {"9" * 100_000}}}]', encoding="utf-8")
    return []


SHAPES: dict[str, Callable[[Path, int], list[str]]] = {
    "realistic": realistic,
    "tiny": tiny,
    "huge-content": huge_content,
    "million-tags": million_tags,
    "empty-lists": empty_lists,
    "long-number": long_number,
}


@dataclass(frozen=True)
class Measured:
    shape: str
    file_mb: float
    peak_mb: float
    seconds: float
    outcome: str

    @property
    def bound_mb(self) -> float:
        return BOUND_BASE_MB + BOUND_FACTOR * self.file_mb


def _manage(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), *args],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )


def fresh_database(work: Path) -> dict[str, str]:
    """The environment of a child that imports into a new SQLite database with an
    account named "bench"."""
    database = work / f"import-{uuid.uuid4().hex[:8]}.sqlite3"
    env = dict(os.environ, DATABASE_URL=f"sqlite:///{database}")
    _manage(env, "migrate", "--verbosity", "0")
    _manage(
        env,
        "shell",
        "-c",
        "from django.contrib.auth import get_user_model; "
        "get_user_model().objects.create_user('bench', password='x')",
    )
    return env


def peak_rss(env: dict[str, str], *args: str) -> tuple[int, float, float, str]:
    """Run manage.py with args; (exit status, peak RSS in MB, seconds, its last line)."""
    started = time.perf_counter()
    child = subprocess.Popen(
        [sys.executable, str(ROOT / "manage.py"), *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert child.stdout is not None
    output = child.stdout.read()
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    seconds = time.perf_counter() - started
    lines = [line for line in output.strip().splitlines() if line.strip()]
    return child.returncode, usage.ru_maxrss / 1024, seconds, (lines[0] if lines else "")


def measure(shape: str, work: Path, mb: int) -> Measured:
    path = work / f"{shape}.json"
    extra = SHAPES[shape](path, mb)
    env = fresh_database(work)
    size = path.stat().st_size / MB
    status, peak, seconds, said = peak_rss(
        env, "import_taproot", str(path), "--user", "bench", *extra
    )
    path.unlink()
    outcome = ("imported: " if status == 0 else "refused: ") + said[:110]
    return Measured(shape, size, peak, seconds, outcome)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=32, help="size of the generated files (MB)")
    parser.add_argument("--work", type=Path, default=None, help="where files and databases go")
    parser.add_argument("--shapes", default=",".join(SHAPES))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.work) as scratch:
        print("| shape | file (MB) | peak RSS (MB) | bound (MB) | seconds | outcome |")
        print("|---|---:|---:|---:|---:|---|")
        for shape in args.shapes.split(","):
            m = measure(shape, Path(scratch), args.mb)
            print(
                f"| {m.shape} | {m.file_mb:.1f} | {m.peak_mb:.0f} | {m.bound_mb:.0f} | "
                f"{m.seconds:.1f} | {m.outcome} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
