from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from oauth2_provider import urls as oauth2_urls

from taproot_site import views

# django-oauth-toolkit: the RFC 8414 / RFC 9728 documents at the origin root, and only
# the endpoints an MCP client uses under /o/ (no device flow, no application pages).
OAUTH2_ENDPOINTS = {"authorize", "token", "revoke-token", "introspect"}
oauth2_patterns = [
    *oauth2_urls.metadata_urlpatterns,
    path(
        "o/",
        include(
            [p for p in oauth2_urls.base_urlpatterns if p.name in OAUTH2_ENDPOINTS]
            + oauth2_urls.dcr_urlpatterns
        ),
    ),
]

urlpatterns = [
    path("", include((oauth2_patterns, "oauth2_provider"))),
    path("healthz", views.healthz, name="healthz"),
    path("dashboard/", include("dashboard.urls")),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
]
