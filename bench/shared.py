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
