import json
import urllib.request

import pytest


@pytest.mark.django_db(transaction=True)
def test_uvicorn_serves_the_app_with_lifespan_on(live_server_process):
    with urllib.request.urlopen(f"{live_server_process.url}/healthz") as response:
        assert json.load(response) == {"status": "ok", "database": "ok"}
    with urllib.request.urlopen(f"{live_server_process.url}/static/css/taproot.css") as response:
        assert response.status == 200
        assert b"--cat-identity" in response.read()
