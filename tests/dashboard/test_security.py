"""Login, CSRF, escaping and the Content-Security-Policy across every dashboard URL."""

import re
import uuid

import pytest
from django.test import Client

from memories.models import ChangeSource, Memory, Revision
from memories.services import close, edit_gist
from tests.dashboard.conftest import XSS, htmx, stored

pytestmark = pytest.mark.django_db

MEMORY = "11111111-2222-4333-8444-555555555555"

READS = [
    "/dashboard/",
    "/dashboard/preview/",
    f"/dashboard/memories/{MEMORY}/",
    f"/dashboard/memories/{MEMORY}/card/",
    f"/dashboard/memories/{MEMORY}/gist/",
    f"/dashboard/memories/{MEMORY}/delete/",
    "/dashboard/closings/",
    "/dashboard/export/",
    "/dashboard/clients/",
]
WRITES = [
    (f"/dashboard/memories/{MEMORY}/curate/", {"salience": "low"}),
    (f"/dashboard/memories/{MEMORY}/gist/", {"gist": "changed"}),
    (f"/dashboard/memories/{MEMORY}/archive/", {}),
    (f"/dashboard/memories/{MEMORY}/unarchive/", {}),
    (f"/dashboard/memories/{MEMORY}/delete/", {}),
    ("/dashboard/revisions/{revision}/restore/", {"use": "before"}),
    ("/dashboard/clients/1/revoke/", {}),
]


@pytest.fixture
def memory(make_memory):
    return make_memory(id=uuid.UUID(MEMORY), gist="Original", salience="medium")


@pytest.mark.parametrize("url", READS)
def test_every_page_needs_a_login(client, memory, url):
    response = client.get(url)

    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/?next=")


@pytest.mark.parametrize(("url", "data"), WRITES)
def test_every_write_needs_a_login_and_changes_nothing_without_one(client, user, memory, url, data):
    edit_gist(owner=user, memory_id=memory.pk, gist="Edited", source=ChangeSource.TOOL)
    revision = Revision.objects.get(memory=memory)

    response = client.post(url.format(revision=revision.pk), data)

    assert response.status_code == 302
    assert (stored(memory).gist, stored(memory).salience) == ("Edited", "medium")
    assert Memory.objects.filter(pk=memory.pk).exists()


@pytest.mark.parametrize(("url", "data"), WRITES)
def test_every_write_is_refused_without_a_csrf_token(user, memory, url, data):
    edit_gist(owner=user, memory_id=memory.pk, gist="Edited", source=ChangeSource.TOOL)
    revision = Revision.objects.get(memory=memory)
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(user)

    response = strict.post(url.format(revision=revision.pk), data, **htmx())

    assert response.status_code == 403
    after = stored(memory)
    assert (after.gist, after.salience, after.archived_at) == ("Edited", "medium", None)
    assert Revision.objects.filter(memory=memory).count() == 1


def test_a_write_with_the_csrf_header_htmx_sends_is_accepted(user, memory):
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(user)
    page = strict.get("/dashboard/").text
    token = re.search(r'hx-headers=\'\{"X-CSRFToken": "([^"]+)"\}\'', page).group(1)

    response = strict.post(
        f"/dashboard/memories/{MEMORY}/curate/",
        {"salience": "low"},
        HTTP_X_CSRFTOKEN=token,
        **htmx(),
    )

    assert response.status_code == 200
    assert stored(memory).salience == "low"


@pytest.fixture
def hostile(user, make_memory):
    memory = make_memory(
        gist=XSS, content=XSS, tags=[XSS], core=True, provenance=XSS, conversation_url=XSS
    )
    make_memory(gist=XSS, content=XSS)  # a catalog line
    close(owner=user, reflection=XSS, conversation_title=XSS)
    edit_gist(owner=user, memory_id=memory.pk, gist=XSS + " again", source=ChangeSource.TOOL)
    return memory


def executable_markup(html: str) -> list[str]:
    """Script elements without a src, and event-handler attributes, in a page."""
    inline_scripts = re.findall(r"<script(?![^>]*\bsrc=)[^>]*>", html)
    handlers = re.findall(r"<[a-z][^>]*\son[a-z]+\s*=", html, flags=re.IGNORECASE)
    return inline_scripts + handlers


@pytest.mark.parametrize(
    "path",
    [
        "/dashboard/",
        "/dashboard/preview/",
        "/dashboard/memories/{id}/",
        "/dashboard/memories/{id}/gist/",
        "/dashboard/memories/{id}/delete/",
        "/dashboard/closings/",
    ],
)
def test_memory_text_is_shown_as_text_everywhere(logged_in, hostile, path):
    html = logged_in.get(path.format(id=hostile.pk)).text

    assert "&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=alert(2)&gt;" in html
    assert "<script>alert(1)" not in html
    assert "<img src=x" not in html
    assert executable_markup(html) == []


@pytest.mark.parametrize(
    ("method", "path", "data"),
    [
        ("get", "/dashboard/memories/{id}/card/", {}),
        ("get", "/dashboard/memories/{id}/gist/", {}),
        ("post", "/dashboard/memories/{id}/curate/", {"salience": "high"}),
        ("post", "/dashboard/memories/{id}/gist/", {"gist": "   "}),  # refused: 422
        ("get", "/dashboard/preview/", {}),
        ("get", "/dashboard/", {"q": "alert"}),
    ],
)
def test_fragments_escape_memory_text_too(logged_in, hostile, method, path, data):
    response = getattr(logged_in, method)(path.format(id=hostile.pk), data, **htmx("memory-list"))

    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in response.text
    assert executable_markup(response.text) == []


def test_pages_send_a_content_security_policy_without_inline_script(logged_in):
    policy = logged_in.get("/dashboard/")["Content-Security-Policy"]

    directives = dict(part.strip().split(" ", 1) for part in policy.split(";"))
    assert directives["script-src"] == "'self'"
    assert "unsafe-inline" not in policy
    assert "unsafe-eval" not in policy
    assert directives["object-src"] == "'none'"
    assert directives["frame-ancestors"] == "'none'"


def test_the_login_page_carries_the_policy_too(client):
    assert "script-src 'self'" in client.get("/accounts/login/")["Content-Security-Policy"]


def test_logout_ends_the_session(logged_in):
    response = logged_in.post("/accounts/logout/")

    assert response.status_code == 302
    assert logged_in.get("/dashboard/").status_code == 302


def test_an_htmx_request_after_the_session_ended_sends_the_whole_page_to_the_login(client, memory):
    response = client.post(
        f"/dashboard/memories/{MEMORY}/curate/",
        {"salience": "low"},
        HTTP_HX_CURRENT_URL="http://testserver/dashboard/?category=error",
        **htmx(),
    )

    assert response.status_code == 200
    assert response["HX-Redirect"] == "/accounts/login/?next=/dashboard/%3Fcategory%3Derror"
    assert stored(memory).salience == "medium"
