from django.apps import AppConfig


class OAuthConfig(AppConfig):
    name = "oauth"
    # The label it had inside taproot_site: its tables and migration records keep their names.
    label = "taproot_oauth"
    verbose_name = "Taproot OAuth"

    def ready(self) -> None:
        from oauth import checks  # noqa: F401  (registers the system checks)
