import pytest
from django.test import override_settings

pytestmark = pytest.mark.django_db

PUBLIC = "http://127.0.0.1:8000"


def test_resource_metadata_names_the_mcp_url_and_this_issuer(client):
    response = client.get("/.well-known/oauth-protected-resource/mcp")
    assert response.status_code == 200
    assert response.json() == {
        "resource": f"{PUBLIC}/mcp",
        "authorization_servers": [PUBLIC],
        "scopes_supported": ["mcp"],
        "bearer_methods_supported": ["header"],
        "resource_name": "Taproot",
    }


def test_root_resource_metadata_is_identical_to_the_mcp_form(client):
    root = client.get("/.well-known/oauth-protected-resource")
    path_form = client.get("/.well-known/oauth-protected-resource/mcp")
    assert root.status_code == 200
    assert root.content == path_form.content


def test_resource_metadata_for_other_paths_does_not_exist(client):
    assert client.get("/.well-known/oauth-protected-resource/admin").status_code == 404


def test_authorization_server_metadata_advertises_only_what_is_accepted(client):
    response = client.get("/.well-known/oauth-authorization-server")
    assert response.status_code == 200
    assert response.json() == {
        "issuer": PUBLIC,
        "authorization_endpoint": f"{PUBLIC}/o/authorize/",
        "token_endpoint": f"{PUBLIC}/o/token/",
        "revocation_endpoint": f"{PUBLIC}/o/revoke_token/",
        "registration_endpoint": f"{PUBLIC}/o/register/",
        "response_types_supported": ["code"],
        "grant_types_supported": ["authorization_code", "refresh_token"],
        "scopes_supported": ["mcp"],
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": [
            "client_secret_basic",
            "client_secret_post",
            "none",
        ],
        "revocation_endpoint_auth_methods_supported": [
            "client_secret_basic",
            "client_secret_post",
            "none",
        ],
        "authorization_response_iss_parameter_supported": True,
        # Claude registers by its metadata document when this is true and "none" is
        # among the token endpoint's methods (oauth.cimd).
        "client_id_metadata_document_supported": True,
    }


def test_issuer_is_string_identical_to_the_resource_metadata_authorization_server(client):
    resource = client.get("/.well-known/oauth-protected-resource/mcp").json()
    server = client.get("/.well-known/oauth-authorization-server").json()
    assert server["issuer"] == resource["authorization_servers"][0]


def test_issuer_path_forms_of_the_metadata_do_not_exist(client):
    assert client.get("/.well-known/oauth-authorization-server/o").status_code == 404


def test_metadata_can_be_read_from_browsers_of_other_origins(client):
    response = client.get("/.well-known/oauth-authorization-server")
    assert response["Access-Control-Allow-Origin"] == "*"


@override_settings(ALLOWED_HOSTS=["internal", "taproot.example.com"])
def test_documents_ignore_the_host_and_scheme_a_proxy_forwards(client):
    # Behind a TLS-terminating proxy the app sees its internal address; every URL in the
    # documents still comes from TAPROOT_PUBLIC_URL.
    headers = {"HTTP_HOST": "internal:8000", "HTTP_X_FORWARDED_PROTO": "https"}
    server = client.get("/.well-known/oauth-authorization-server", **headers).json()
    resource = client.get("/.well-known/oauth-protected-resource/mcp", **headers).json()
    urls = [server["issuer"], resource["resource"], *resource["authorization_servers"]]
    urls += [value for key, value in server.items() if key.endswith("_endpoint")]
    assert all(url.startswith(f"{PUBLIC}/") or url == PUBLIC for url in urls), urls
    assert "internal" not in str(server) + str(resource)
