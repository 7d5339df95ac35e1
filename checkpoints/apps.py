from django.apps import AppConfig
from django.core.checks import register


class CheckpointsConfig(AppConfig):
    name = "checkpoints"
    verbose_name = "Checkpoints"

    def ready(self) -> None:
        from checkpoints import checks

        register(checks.check_encryption_key, "checkpoints")
