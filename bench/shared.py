"""Where the shared benchmark material lives: the LoCoMo data and the reference scorer.

It sits beside the checkout (`../shared`), never inside it; TAPROOT_SHARED_DIR points
elsewhere when the checkout lives somewhere else.
"""

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def shared_dir() -> Path:
    configured = os.environ.get("TAPROOT_SHARED_DIR", "").strip()
    return Path(configured) if configured else ROOT.parent / "shared"


def locomo_dev_split() -> Path:
    return shared_dir() / "data" / "locomo" / "locomo-dev.json"


def reference_scorer() -> Path:
    return shared_dir() / "bench" / "locomo_eval_reference.py"


def missing_reference() -> str | None:
    """Why the LoCoMo cross-check cannot run here, in words a newcomer can act on; None
    when the reference scorer and the development split are both in place."""
    missing = [path for path in (reference_scorer(), locomo_dev_split()) if not path.exists()]
    if not missing:
        return None
    where = shared_dir()
    return (
        "needs the shared benchmark material, which is kept outside the repository: "
        "the LoCoMo reference scorer and development split ("
        + ", ".join(str(path.relative_to(where)) for path in missing)
        + f" not found in {where}). Put the shared folder beside the checkout as "
        "../shared, or set TAPROOT_SHARED_DIR to where it is (docs/benchmarks.md, "
        '"Retrieval quality on LoCoMo")'
    )
