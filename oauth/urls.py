"""django-oauth-toolkit's endpoints as Taproot serves them, in its `oauth2_provider` namespace.

At the origin root: RFC 8414 metadata, and RFC 9728 metadata in its root form and for
/mcp (the only protected resource here; other paths are 404). Under /o/: authorize
(consent), token, revoke, and registration (RFC 7591/7592). No device flow, no
introspection (the /mcp token check reads the database directly), no application pages.
"""

from django.urls import path
from oauth2_provider import views as oauth2_views

from oauth.authorization import AuthorizationView
from oauth.codes import TokenView
from oauth.registration import RegistrationManagementView, RegistrationView

app_name = "oauth2_provider"

urlpatterns = [
    path(
        ".well-known/oauth-authorization-server",
        oauth2_views.OAuthServerMetadataView.as_view(),
        name="oauth-server-metadata",
    ),
    path(
        ".well-known/oauth-protected-resource",
        oauth2_views.OAuthProtectedResourceMetadataView.as_view(),
        name="oauth-resource-metadata",
    ),
    path(
        ".well-known/oauth-protected-resource/mcp",
        oauth2_views.OAuthProtectedResourceMetadataView.as_view(),
        name="oauth-resource-metadata-mcp",
    ),
    path("o/authorize/", AuthorizationView.as_view(), name="authorize"),
    path("o/token/", TokenView.as_view(), name="token"),
    path("o/revoke_token/", oauth2_views.RevokeTokenView.as_view(), name="revoke-token"),
    path("o/register/", RegistrationView.as_view(), name="dcr-register"),
    path(
        "o/register/<str:client_id>/",
        RegistrationManagementView.as_view(),
        name="dcr-register-management",
    ),
]
