"""What a LoCoMo run checks of its own figures: every ranked list scored again by the
shared reference scorer, and Taproot's rankings compared between SQLite and PostgreSQL."""

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from bench.shared import reference_scorer

REFERENCE_SCORER = reference_scorer()


def cross_check(retrieval: dict[str, Any], data: Path) -> list[str]:
    """Score every ranked list again with the shared reference scorer, when it is there."""
    if not REFERENCE_SCORER.exists():
        return [f"reference scorer not found at {REFERENCE_SCORER}: no cross-check"]
    lines = []
    worst = 0.0
    for unit, unit_report in retrieval["units"].items():
        for system in unit_report["systems"].values():
            out = Path(system["results"]).with_suffix(".reference.json")
            subprocess.run(
                [sys.executable, str(REFERENCE_SCORER), "score", "--unit", unit, "--data",
                 str(data), "--results", system["results"], "--json-out", str(out)],
                check=True, capture_output=True,
            )  # fmt: skip
            theirs = json.loads(out.read_text())["system"]["metrics"]
            for category, ours in system["scores"].items():
                for metric in ("R@5", "R@10", "MRR@10"):
                    worst = max(worst, abs(ours[metric] - theirs[category][metric]))
    lines.append(
        "Every ranked list above was scored again by the shared reference scorer "
        f"(`score --results`): largest difference from this harness's figures {worst:.4f}."
    )
    return lines


def same_rankings(runs: dict[str, dict[str, Any]]) -> list[str]:
    """Whether Taproot ranked (and replayed) every question alike on both databases."""
    lines = []
    for system in ("Taproot", "Taproot, replayed", "Taproot, MiniLM", "Taproot, MiniLM, replayed"):
        differing = total = 0
        for unit, unit_report in runs["sqlite"]["units"].items():
            if system not in unit_report["systems"]:
                continue
            ours = Path(unit_report["systems"][system]["results"]).read_text().splitlines()
            theirs_path = runs["postgres"]["units"][unit]["systems"][system]["results"]
            theirs = Path(theirs_path).read_text().splitlines()
            total += len(ours)
            differing += sum(a != b for a, b in zip(ours, theirs, strict=True))
        if not total:
            continue
        if differing == 0:
            lines.append(
                f"{system}: rankings identical on SQLite and PostgreSQL ({total} questions)."
            )
        else:
            lines.append(
                f"{system}: rankings differ between SQLite and PostgreSQL on {differing} of "
                f"{total} questions."
            )
    return lines
