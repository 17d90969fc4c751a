"""docs/configuration.md names every setting Taproot reads, so a setting added to the code
without a line on the page (its default, what it does) fails here."""

import re

from tests.live_server import ROOT

PAGE = (ROOT / "docs" / "configuration.md").read_text()


def settings_read() -> set[str]:
    """The environment variables the settings, the launcher and the scripts read."""
    names: set[str] = set()
    for path in sorted((ROOT / "taproot_site").glob("*.py")):
        names |= set(re.findall(r"\benv_\w+\(\s*\"([A-Z][A-Z0-9_]+)\"", path.read_text()))
    names |= set(re.findall(r"\$\{(TAPROOT_[A-Z_]+):-", (ROOT / "scripts" / "lib.sh").read_text()))
    return names


def test_the_walk_finds_the_settings():
    assert {"DATABASE_URL", "TAPROOT_EMBEDDER", "WORKERS", "TAPROOT_PYTHON"} <= settings_read()


def test_every_setting_read_is_on_the_configuration_page():
    missing = sorted(name for name in settings_read() if f"`{name}`" not in PAGE)
    assert missing == []
