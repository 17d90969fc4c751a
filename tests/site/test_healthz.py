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
