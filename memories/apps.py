from django.apps import AppConfig
from django.db.models.signals import post_migrate


class MemoriesConfig(AppConfig):
    name = "memories"
    verbose_name = "Memories"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from memories.maintenance import analyze_sqlite_after_migrate

        post_migrate.connect(
            analyze_sqlite_after_migrate, sender=self, dispatch_uid="taproot-analyze-sqlite"
        )
