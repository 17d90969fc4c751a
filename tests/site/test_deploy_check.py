"""`manage.py check --deploy` with the settings for a public server that
docs/connecting-claude.md gives (and the README repeats): every warning it gives is one
that page explains."""

import re
import secrets

import pytest

from tests.live_server import ROOT
from tests.oauth.test_checks import run_manage

PAGE = (ROOT / "docs" / "connecting-claude.md").read_text()
README = (ROOT / "README.md").read_text()


def settings_block(text: str, heading: str) -> str:
    """The first ```sh block after the heading."""
    after = text.split(heading, 1)[1]
    return after.split("```sh", 1)[1].split("```", 1)[0]


def public_server_settings() -> dict[str, str]:
    """The `export NAME=value` lines of the page's "Settings for a public server"."""
    block = settings_block(PAGE, "## 2. Settings for a public server")
    settings = {}
    for name, value in re.findall(r"^export (\w+)=(\S+)", block, flags=re.MULTILINE):
        settings[name] = value.strip("'\"")
    # The page shows where the secret goes, not one.
    assert settings.get("SECRET_KEY") == "…"
    settings["SECRET_KEY"] = secrets.token_urlsafe(50)
    return settings


def test_the_readme_shows_the_page_s_settings_word_for_word():
    readme_block = settings_block(README, "2. **Settings for a public server**")
    page_block = settings_block(PAGE, "## 2. Settings for a public server")
    # The README's copy sits in a numbered list, indented three spaces.
    assert readme_block.replace("\n   ", "\n").strip() == page_block.strip()


def test_the_page_names_the_public_settings_this_test_reads():
    settings = public_server_settings()
    assert settings["DEBUG"] == "0"
    assert settings["TAPROOT_PUBLIC_URL"].startswith("https://")


@pytest.mark.django_db(transaction=True)
def test_every_deploy_warning_with_the_public_settings_is_explained_on_the_page():
    result = run_manage("check", "--deploy", env=public_server_settings())
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    warnings = re.findall(r"\(([a-z_0-9]+\.[WE]\d+)\)", output)
    unexplained = [warning for warning in warnings if warning not in PAGE]
    assert unexplained == [], output
    # The two the page names: HSTS without includeSubDomains and preload.
    assert sorted(warnings) == ["security.W005", "security.W021"], output
