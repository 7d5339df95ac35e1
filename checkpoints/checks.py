"""Startup checks for the store's settings (registered in CheckpointsConfig.ready): a
CHECKPOINT_ENCRYPTION_KEY that holds no Fernet key fails `manage.py check`, and so `make run`
(its migrate runs the checks), rather than the first step that writes a checkpoint."""

from typing import Any

from django.core.checks import CheckMessage, Error
from django.core.exceptions import ImproperlyConfigured

from checkpoints.storage.crypto import current_sealer


def check_encryption_key(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    try:
        current_sealer()
    except ImproperlyConfigured as exc:
        return [Error(str(exc), id="checkpoints.E001")]
    return []
