"""The README's MCP Inspector commands run the Inspector CI installs and tests against
(`.ci/install-tools`), and say which Node it needs: an unpinned `npx` under an older Node
silently installs an old Inspector that cannot talk to Taproot."""

import re

from tests.live_server import ROOT

README = (ROOT / "README.md").read_text()
INSTALL_TOOLS = (ROOT / ".ci" / "install-tools").read_text()


def ci_inspector() -> str:
    """The Inspector package and version .ci/install-tools installs."""
    match = re.search(r"(@modelcontextprotocol/inspector@[0-9][^\s\"']*)", INSTALL_TOOLS)
    assert match, "no pinned Inspector in .ci/install-tools"
    return match.group(1)


def test_ci_installs_the_inspector_at_an_exact_version():
    assert ci_inspector() == "@modelcontextprotocol/inspector@2.12.0"


def shell_blocks() -> list[str]:
    return re.findall(r"```sh\n(.*?)```", README, flags=re.DOTALL)


def test_every_inspector_command_in_the_readme_runs_ci_s_version():
    commands = [
        command
        for block in shell_blocks()
        for command in re.findall(r"npx (@modelcontextprotocol/inspector\S*)", block)
    ]
    assert len(commands) >= 4
    assert set(commands) == {ci_inspector()}


def test_the_readme_says_the_inspector_needs_node_22_19():
    for block in shell_blocks():
        if "npx @modelcontextprotocol/inspector" in block:
            context = README.split(block, 1)[0][-600:] + block
            assert "Node 22.19" in context, block
