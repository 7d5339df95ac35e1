"""Pick the checkpoint backend named by settings.CHECKPOINT_BACKEND (a dotted path)."""

from functools import cache

from django.conf import settings
from django.utils.module_loading import import_string

from checkpoints.backends.base import BaseCheckpointBackend

DEFAULT_BACKEND = "checkpoints.backends.orm.OrmBackend"


@cache
def get_backend() -> BaseCheckpointBackend:
    backend_class = import_string(getattr(settings, "CHECKPOINT_BACKEND", DEFAULT_BACKEND))
    backend: BaseCheckpointBackend = backend_class()
    return backend
