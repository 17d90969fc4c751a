from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from django.views.generic import RedirectView

from oauth import urls as oauth_urls
from taproot_site import views

urlpatterns = [
    # django-oauth-toolkit: metadata at the origin root, the endpoints under /o/.
    path("", include(oauth_urls)),
    path("", RedirectView.as_view(pattern_name="dashboard:index"), name="home"),
    path("healthz", views.healthz, name="healthz"),
    path("favicon.ico", views.favicon, name="favicon"),
    path("dashboard/", include("dashboard.urls")),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
]
