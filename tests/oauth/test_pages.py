import re

import pytest
from django.conf import settings

pytestmark = pytest.mark.django_db

OWN_TEMPLATES = [
    "base.html",
    "registration/login.html",
    "registration/locked_out.html",
    "oauth2_provider/authorize.html",
]


def test_login_page_has_labelled_fields_and_the_stylesheet(client):
    html = client.get("/accounts/login/").content.decode()
    assert '<label for="id_username">' in html and 'id="id_username"' in html
    assert '<label for="id_password">' in html and 'id="id_password"' in html
    assert 'autocomplete="current-password"' in html
    assert "/static/css/taproot.css" in html
    assert 'name="viewport"' in html


def test_wrong_password_is_reported_and_marks_the_fields(client, user):
    response = client.post("/accounts/login/", {"username": "alice", "password": "nope"})
    assert response.status_code == 200
    html = response.content.decode()
    assert 'role="alert"' in html
    assert 'aria-invalid="true"' in html


def test_logging_in_goes_to_the_next_page(client, user):
    response = client.post(
        "/accounts/login/", {"username": "alice", "password": "pw-alice-123", "next": "/admin/"}
    )
    assert response.status_code == 302
    assert response["Location"] == "/admin/"


@pytest.mark.parametrize("name", OWN_TEMPLATES)
def test_templates_need_no_inline_script_or_style(name):
    source = (settings.BASE_DIR / "templates" / name).read_text()
    assert not re.search(r"<script(?![^>]*\bsrc=)", source)
    assert " style=" not in source
    assert not re.search(r"\son[a-z]+=", source)  # no inline event handlers
    assert "http://" not in source and "https://" not in source  # no CDN


def test_stylesheet_has_dark_mode_focus_styles_and_category_colours():
    css = (settings.BASE_DIR / "static" / "css" / "taproot.css").read_text()
    assert "@media (prefers-color-scheme: dark)" in css
    assert ":focus-visible" in css
    assert "@media (max-width:" in css
    for category, colour in {
        "identity": "#818cf8",
        "relationship": "#f472b6",
        "active_thread": "#2dd4bf",
        "error": "#f87171",
        "episodic": "#fbbf24",
    }.items():
        assert f"--cat-{category}: {colour};" in css
    assert "url(http" not in css and "@import" not in css


def test_base_template_keeps_the_blocks_other_pages_extend():
    source = (settings.BASE_DIR / "templates" / "base.html").read_text()
    for block in [
        "title",
        "head",
        "body_class",
        "body_attrs",
        "brand_href",
        "nav",
        "main_class",
        "content",
        "scripts",
    ]:
        assert f"{{% block {block} %}}" in source


def test_consent_page_policy_lets_the_decision_redirect_to_claude(claude_flow):
    # Browsers apply a CSP form-action to the redirect that follows a form post, so a
    # form-action of 'self' would stop Allow/Deny from ever reaching Claude's callback.
    page = claude_flow.consent_page()
    assert page.status_code == 200
    directives = {}
    for part in page.get("Content-Security-Policy", "").split(";"):
        name, _, value = part.strip().partition(" ")
        if name:
            directives[name] = value
    if "form-action" in directives:
        assert "https://claude.ai" in directives["form-action"]
        assert "https://claude.com" in directives["form-action"]
    assert "script-src" in directives  # the page does carry the site's policy


def test_favicon_ico_at_the_root_is_the_sites_icon(client):
    response = client.get("/favicon.ico")

    icon = settings.BASE_DIR / "static" / "img" / "favicon.ico"

    assert response.status_code == 200
    assert response["Content-Type"] == "image/x-icon"
    assert icon.exists() and response.content == icon.read_bytes()
    assert response.content.startswith(b"\x00\x00\x01\x00")  # an ICO file
    assert "max-age=86400" in response["Cache-Control"]
    assert client.head("/favicon.ico").status_code == 200


@pytest.mark.parametrize("page", ["login", "consent"])
def test_login_and_consent_pages_link_an_icon_that_answers(request, client, page):
    if page == "consent":
        response = request.getfixturevalue("claude_flow").consent_page()
    else:
        response = client.get("/accounts/login/")
    assert response.status_code == 200

    icons = re.findall(r'<link rel="icon" href="([^"]+)"', response.content.decode())

    assert icons, "no icon linked: browsers then ask /favicon.ico"
    for href in icons:
        assert client.get(href).status_code == 200, href
