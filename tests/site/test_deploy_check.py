"""`manage.py check --deploy` with the README's settings for a public server: every
warning it gives is one the README explains."""

import re
import secrets

import pytest

from tests.live_server import ROOT
from tests.oauth.test_checks import run_manage

README = (ROOT / "README.md").read_text()


def public_server_settings() -> dict[str, str]:
    """The `export NAME=value` lines of the README's "Settings for a public server"."""
    section = README.split("### 2. Settings for a public server", 1)[1].split("\n### ", 1)[0]
    block = section.split("```sh", 1)[1].split("```", 1)[0]
    settings = {}
    for name, value in re.findall(r"^export (\w+)=(\S+)", block, flags=re.MULTILINE):
        settings[name] = value.strip("'\"")
    # The README shows where the secret goes, not one.
    assert settings.get("SECRET_KEY") == "…"
    settings["SECRET_KEY"] = secrets.token_urlsafe(50)
    return settings


def test_the_readme_names_the_public_settings_this_test_reads():
    settings = public_server_settings()
    assert settings["DEBUG"] == "0"
    assert settings["TAPROOT_PUBLIC_URL"].startswith("https://")


@pytest.mark.django_db(transaction=True)
def test_every_deploy_warning_with_the_readme_settings_is_explained_in_the_readme():
    result = run_manage("check", "--deploy", env=public_server_settings())
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    warnings = re.findall(r"\(([a-z_0-9]+\.[WE]\d+)\)", output)
    unexplained = [warning for warning in warnings if warning not in README]
    assert unexplained == [], output
    # The two the README names: HSTS without includeSubDomains and preload.
    assert sorted(warnings) == ["security.W005", "security.W021"], output
