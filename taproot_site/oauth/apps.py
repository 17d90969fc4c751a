from django.apps import AppConfig


class OAuthConfig(AppConfig):
    name = "taproot_site.oauth"
    label = "taproot_oauth"
    verbose_name = "Taproot OAuth"

    def ready(self) -> None:
        from taproot_site.oauth import checks  # noqa: F401  (registers the system checks)
