"""The dashboard's Import page: a file checked (the dry run shown), then imported on
confirmation of that same file; refusals as sentences; nothing changed before then."""

import hashlib
import io
import json
import zipfile

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from memories.models import Memory, Snapshot
from tests.dashboard.conftest import XSS, htmx
from tests.store import unchanged

pytestmark = pytest.mark.django_db

URL = reverse("dashboard:import")
LIST = b"- Prefers short answers\n- Lives in Lisbon\n"


def upload(data, name="memories.md"):
    return SimpleUploadedFile(name, data)


def test_the_page_asks_for_a_file_and_is_in_the_navigation(logged_in):
    page = logged_in.get(URL).content.decode()

    assert 'type="file"' in page
    assert f'href="{URL}" aria-current="page"' in page


def test_the_page_needs_a_login(client):
    assert client.get(URL)["Location"].startswith("/accounts/login/")


def test_checking_a_file_shows_the_dry_run_and_changes_nothing(logged_in):
    with unchanged():
        response = logged_in.post(URL, {"file": upload(LIST)}, **htmx("import-result"))

    page = response.content.decode()
    assert response.status_code == 200
    assert page.lstrip().startswith('<section id="import-result"')
    assert "Dry run: 2 memories and 0 closings would be imported" in page
    assert '<th scope="row">relationship</th><td>2</td><td>0</td>' in page
    assert hashlib.sha256(LIST).hexdigest() in page
    assert 'name="confirm"' in page


def test_confirming_imports_the_checked_file(logged_in, user):
    fingerprint = hashlib.sha256(LIST).hexdigest()

    response = logged_in.post(
        URL, {"file": upload(LIST), "checked": fingerprint, "confirm": "1"}, **htmx()
    )

    assert "Imported 2 memories" in response.content.decode()
    assert Memory.objects.filter(owner=user).count() == 2
    assert Snapshot.objects.filter(owner=user, reason="before-import").count() == 1


def test_confirming_another_file_than_the_one_checked_is_refused(logged_in):
    with unchanged():
        response = logged_in.post(
            URL, {"file": upload(LIST), "checked": "0" * 64, "confirm": "1"}, **htmx()
        )

    assert response.status_code == 409
    assert "not the file that was checked" in response.content.decode()


def test_a_basic_memory_zip_is_checked_and_imported(logged_in, user):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("notes/a.md", "---\ntitle: Soil\ntags: [garden]\n---\nCompost first.\n")
    data = buffer.getvalue()

    checked = logged_in.post(URL, {"file": upload(data, "notes.zip")}, **htmx())
    done = logged_in.post(
        URL,
        {
            "file": upload(data, "notes.zip"),
            "checked": hashlib.sha256(data).hexdigest(),
            "confirm": "1",
        },
        **htmx(),
    )

    assert "Read as: basic-memory" in checked.content.decode()
    assert "Imported 1 memory" in done.content.decode()
    assert Memory.objects.get(owner=user).gist == "Soil"


def test_a_bad_file_is_refused_with_a_sentence_and_nothing_changes(logged_in):
    bad = b'{"type": "entity", "name": "A"}\n{"type": "entity", "name": '
    with unchanged():
        response = logged_in.post(URL, {"file": upload(bad, "memory.jsonl")}, **htmx())

    page = response.content.decode()
    assert response.status_code == 422
    assert "line 2 is not JSON" in page
    assert "Traceback" not in page


@pytest.mark.parametrize("kind", ["deep", "digits", "sexagesimal", "month", "offset"])
def test_hostile_front_matter_is_refused_with_a_sentence_naming_the_note(logged_in, kind):
    from tests.memories.test_import_sources import HOSTILE_FRONT_MATTER, hostile_note

    with unchanged():
        response = logged_in.post(URL, {"file": upload(hostile_note(kind), "notes.zip")}, **htmx())

    page = response.content.decode()
    assert response.status_code == 422
    assert "note &#x27;notes/odd.md&#x27;" in page
    assert HOSTILE_FRONT_MATTER[kind][1] in page


def test_a_file_over_the_size_limit_is_refused(logged_in, settings):
    settings.TAPROOT_IMPORT_MAX_MB = 1
    with unchanged():
        response = logged_in.post(URL, {"file": upload(b"- x\n" * 300_000)}, **htmx())

    assert response.status_code == 413
    assert "imports are limited to 1 MB" in response.content.decode()


def test_no_file_is_a_form_error(logged_in):
    response = logged_in.post(URL, {}, **htmx())

    assert response.status_code == 400
    assert "Choose the file to import." in response.content.decode()


def test_memory_text_in_a_result_is_escaped(logged_in):
    data = json.dumps([{"content": XSS}]).encode()  # no id: refused, quoting the record

    response = logged_in.post(URL, {"file": upload(data, XSS)}, **htmx())

    assert "<script>" not in response.content.decode()


def test_another_users_store_is_never_touched(logged_in, user, other_user, make_memory):
    theirs = make_memory(owner=other_user, content="- Prefers short answers")
    fingerprint = hashlib.sha256(LIST).hexdigest()

    logged_in.post(URL, {"file": upload(LIST), "checked": fingerprint, "confirm": "1"}, **htmx())

    assert Memory.objects.filter(owner=other_user).get() == theirs
    assert Memory.objects.filter(owner=user).count() == 2


def test_imported_memories_show_in_the_dashboard(logged_in):
    data = b'{"type":"entity","name":"Maya","entityType":"person","observations":["Likes figs"]}'
    logged_in.post(
        URL,
        {
            "file": upload(data, "memory.jsonl"),
            "checked": hashlib.sha256(data).hexdigest(),
            "confirm": "1",
        },
        **htmx(),
    )

    page = logged_in.get(reverse("dashboard:index")).content.decode()

    assert "Maya (person)" in page
