import pytest
from django.db import connection

pytestmark = pytest.mark.django_db


def test_healthz_reports_ok_with_the_database_reachable(client):
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok", "database": "ok"}
    assert "no-cache" in response["Cache-Control"]


def test_healthz_reports_503_when_the_database_fails(client, monkeypatch):
    from django.db import DatabaseError

    def broken_cursor(*args, **kwargs):
        raise DatabaseError("down")

    monkeypatch.setattr(connection, "cursor", broken_cursor)
    response = client.get("/healthz")
    assert response.status_code == 503
    assert response.json()["database"] == "unreachable"


def test_healthz_refuses_writes(client):
    assert client.post("/healthz").status_code == 405


def test_admin_login_page_is_reachable(client):
    response = client.get("/admin/", follow=True)
    assert response.status_code == 200
    assert b"password" in response.content.lower()


def test_the_site_root_leads_to_the_dashboard(client):
    response = client.get("/")
    assert response.status_code == 302
    assert response["Location"] == "/dashboard/"


@pytest.mark.parametrize("host", ["127.0.0.1:8000", "localhost", "[::1]:8000", "127.0.0.1"])
def test_healthz_answers_a_probe_on_loopback_whatever_allowed_hosts_says(client, settings, host):
    settings.ALLOWED_HOSTS = ["taproot.example.com"]

    response = client.get("/healthz", HTTP_HOST=host)

    assert response.status_code == 200
    assert response.json() == {"status": "ok", "database": "ok"}


@pytest.mark.parametrize(
    ("path", "host"),
    [
        ("/healthz", "evil.example"),
        ("/healthz", "127.0.0.1.evil.example"),
        ("/accounts/login/", "127.0.0.1"),
        ("/dashboard/", "localhost:8000"),
    ],
)
def test_other_hosts_and_other_paths_still_meet_the_host_check(client, settings, path, host):
    settings.ALLOWED_HOSTS = ["taproot.example.com"]

    assert client.get(path, HTTP_HOST=host).status_code == 400
