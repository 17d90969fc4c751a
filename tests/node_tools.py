"""Node 22 and the npm tools the MCP tests drive (the conformance suite, the Inspector
CLI), where `.ci/install-tools` puts them: under .tools/, from the npm registry."""

import os
import shutil
import subprocess
from functools import cache
from pathlib import Path

from tests.conftest import require_tool

ROOT = Path(__file__).resolve().parent.parent
TOOLS = ROOT / ".tools"
NODE_CANDIDATES = [TOOLS / "node22" / "node_modules" / ".bin" / "node"]
NPM_BIN = TOOLS / "mcp" / "node_modules" / ".bin"
# The Inspector 2.12 asks for 22.19; the conformance suite needs 22.
MIN_NODE = (22, 19)


def _node_version(node: Path) -> tuple[int, ...]:
    try:
        out = subprocess.run(
            [str(node), "--version"], capture_output=True, text=True, timeout=20, check=True
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return ()
    return tuple(int(part) for part in out.strip().lstrip("v").split(".")[:2] if part.isdigit())


@cache
def node22() -> Path | None:
    """A Node at least MIN_NODE: the one .ci/install-tools installs, else the one on PATH."""
    on_path = shutil.which("node")
    for candidate in [*NODE_CANDIDATES, Path(on_path) if on_path else None]:
        if candidate and candidate.exists() and _node_version(candidate) >= MIN_NODE:
            return candidate
    return None


def npm_tool(name: str) -> Path | None:
    """The script behind an installed npm bin (e.g. "conformance", "inspector")."""
    link = NPM_BIN / name
    return link.resolve() if link.exists() else None


def node_command(tool: str) -> list[str]:
    """[node, script] to run an installed npm tool with Node 22; skips (fails in CI) when
    either is missing."""
    node, script = node22(), npm_tool(tool)
    require_tool(
        node is not None and script is not None,
        f"needs Node >= {'.'.join(map(str, MIN_NODE))} and the npm package providing "
        f"'{tool}' under .tools/ (run .ci/install-tools)",
    )
    assert node is not None and script is not None
    return [str(node), str(script)]


def node_env(**extra: str) -> dict[str, str]:
    """The environment with Node 22 first on PATH (for scripts that call `node`)."""
    env = dict(os.environ, **extra)
    node = node22()
    if node is not None:
        env["PATH"] = f"{node.parent}{os.pathsep}{env.get('PATH', '')}"
    return env
