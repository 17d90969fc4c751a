"""The shape of mcp_bridge that keeps a tool cheap to add and read: each tool is one module
of mcp_bridge.tools, found there; parameters are typed, not Any. (That no file grows past
500 lines, here or anywhere in the application, tests/site/test_module_size.py holds.)"""

import subprocess
import sys
from pathlib import Path

from django.conf import settings

from mcp_bridge.tools import DEFINITIONS

BRIDGE = Path(settings.BASE_DIR) / "mcp_bridge"
MAX_ANY_PARAMETERS = 25


def test_every_module_of_the_tools_package_is_one_tool_in_its_place():
    modules = sorted(p.stem for p in (BRIDGE / "tools").glob("*.py") if p.stem != "__init__")
    assert len(DEFINITIONS) == len(modules)
    assert sorted(d.name for d in DEFINITIONS) == sorted(f"taproot_{m}" for m in modules)
    assert [d.position for d in DEFINITIONS] == list(range(1, len(DEFINITIONS) + 1))


def test_the_bridge_has_at_most_25_parameters_typed_any():
    script = Path(settings.BASE_DIR) / "scripts" / "count-any"
    run = subprocess.run(
        [sys.executable, str(script), str(BRIDGE)], capture_output=True, text=True, check=True
    )
    total = int(run.stdout.splitlines()[-1].split()[0])
    assert 0 < total <= MAX_ANY_PARAMETERS, run.stdout
