from django.apps import AppConfig


class OAuthConfig(AppConfig):
    name = "oauth"
    # The label it had inside taproot_site: its tables and migration records keep their names.
    label = "taproot_oauth"
    verbose_name = "Taproot OAuth"

    def ready(self) -> None:
        from django.contrib.auth.signals import user_logged_in, user_login_failed

        from oauth import checks  # noqa: F401  (registers the system checks)
        from oauth.slowdown import on_logged_in, on_login_failed

        user_login_failed.connect(on_login_failed, dispatch_uid="taproot-login-failed")
        user_logged_in.connect(on_logged_in, dispatch_uid="taproot-logged-in")
