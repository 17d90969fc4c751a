"""The MCP Inspector commands of the README and docs/ run the Inspector CI installs and
tests against (`.ci/install-tools`), and say which Node it needs: an unpinned `npx` under
an older Node silently installs an old Inspector that cannot talk to Taproot."""

import re

from tests.live_server import ROOT

# Each page on its own, so a command's context is read from the page it is on.
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
INSTALL_TOOLS = (ROOT / ".ci" / "install-tools").read_text()


def ci_inspector() -> str:
    """The Inspector package and version .ci/install-tools installs."""
    match = re.search(r"(@modelcontextprotocol/inspector@[0-9][^\s\"']*)", INSTALL_TOOLS)
    assert match, "no pinned Inspector in .ci/install-tools"
    return match.group(1)


def test_ci_installs_the_inspector_at_an_exact_version():
    assert ci_inspector() == "@modelcontextprotocol/inspector@2.12.0"


def shell_blocks() -> list[tuple[str, str]]:
    """Each ```sh block, with the text of the page it is on."""
    blocks = []
    for page in PAGES:
        text = page.read_text()
        blocks += [(block, text) for block in re.findall(r"```sh\n(.*?)```", text, re.DOTALL)]
    return blocks


def test_every_inspector_command_in_the_docs_runs_ci_s_version():
    commands = [
        command
        for block, _ in shell_blocks()
        for command in re.findall(r"npx (@modelcontextprotocol/inspector\S*)", block)
    ]
    assert len(commands) >= 4
    assert set(commands) == {ci_inspector()}


def test_the_docs_say_the_inspector_needs_node_22_19():
    for block, page in shell_blocks():
        if "npx @modelcontextprotocol/inspector" in block:
            context = page.split(block, 1)[0][-600:] + block
            assert "Node 22.19" in context, block
