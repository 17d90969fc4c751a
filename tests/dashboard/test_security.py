"""Login, CSRF, escaping and the Content-Security-Policy across every dashboard URL."""

import re
import uuid
from html.parser import HTMLParser

import pytest
from django.test import Client
from django.urls import resolve, reverse

from memories.models import ChangeSource, Memory, Revision
from memories.services import close, edit_gist
from tests.dashboard.conftest import XSS, htmx
from tests.store import stored

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
    # The questions asked before a restore and a revoke.
    "/dashboard/revisions/1/restore/",
    "/dashboard/clients/1/revoke/",
    "/dashboard/import/",
]
WRITES = [
    (f"/dashboard/memories/{MEMORY}/curate/", {"salience": "low"}),
    (f"/dashboard/memories/{MEMORY}/gist/", {"gist": "changed"}),
    (f"/dashboard/memories/{MEMORY}/archive/", {}),
    (f"/dashboard/memories/{MEMORY}/unarchive/", {}),
    (f"/dashboard/memories/{MEMORY}/delete/", {}),
    ("/dashboard/revisions/{revision}/restore/", {"use": "before"}),
    ("/dashboard/clients/1/revoke/", {}),
    (f"/dashboard/suggestions/{MEMORY}/archive/apply/", {}),
    (f"/dashboard/suggestions/{MEMORY}/archive/dismiss/", {}),
    ("/dashboard/import/", {"confirm": "1"}),
]


def test_the_lists_above_cover_every_dashboard_url():
    from dashboard.urls import urlpatterns

    covered = {resolve(url.format(revision=1)).url_name for url in READS}
    covered |= {resolve(url.format(revision=1)).url_name for url, _ in WRITES}

    assert covered == {pattern.name for pattern in urlpatterns}


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


class _Elements(HTMLParser):
    """Every start tag with its attributes, as a browser would parse the page."""

    def __init__(self) -> None:
        super().__init__()
        self.elements: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, dict(attrs)))


def elements(html: str) -> list[tuple[str, dict[str, str | None]]]:
    parser = _Elements()
    parser.feed(html)
    parser.close()
    return parser.elements


def injected_markup(html: str) -> list[str]:
    """What the hostile text would become if it were not escaped: an inline script, an
    event-handler attribute, or its image."""
    found: list[str] = []
    for tag, attrs in elements(html):
        if tag == "script" and "src" not in attrs:
            found.append("<script> without src")
        found += [f"<{tag} {name}=…>" for name in attrs if name.startswith("on")]
        if tag == "img" and attrs.get("src") == "x":
            found.append("<img src=x>")
    return found


def executable_markup(html: str) -> list[str]:
    """Injected markup, and any image or embed at all (the dashboard shows none)."""
    embeds = [
        f"<{tag}>" for tag, _ in elements(html) if tag in ("img", "iframe", "object", "embed")
    ]
    return injected_markup(html) + embeds


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


def test_memory_text_is_shown_as_text_in_the_admin(client, hostile, django_user_model):
    admin = django_user_model.objects.create_superuser("root", password="pw-root-123")
    client.force_login(admin)
    revision = Revision.objects.filter(memory=hostile).first()
    showing_text = [
        reverse("admin:memories_memory_changelist"),
        reverse("admin:memories_memory_change", args=[hostile.pk]),
        reverse("admin:memories_revision_change", args=[revision.pk]),
        reverse("admin:memories_closing_changelist"),
    ]

    for url in [*showing_text, reverse("admin:memories_revision_changelist")]:
        html = client.get(url).text
        assert url not in showing_text or "&lt;script&gt;alert(1)&lt;/script&gt;" in html, url
        assert "<script>alert(1)" not in html, url
        assert "<img src=x" not in html, url
        assert injected_markup(html) == [], url


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
