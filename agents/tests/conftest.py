from collections.abc import Iterator
from typing import Any

import pytest

from checkpoints.backends import get_backend
from checkpoints.backends.memory import MemoryBackend


@pytest.fixture
def memory_backend(settings: Any) -> Iterator[MemoryBackend]:
    """The in-memory checkpoint backend, for the runtime's unit tests (use it autouse there)."""
    settings.CHECKPOINT_BACKEND = "checkpoints.backends.memory.MemoryBackend"
    get_backend.cache_clear()
    backend = get_backend()
    assert isinstance(backend, MemoryBackend)
    yield backend
    get_backend.cache_clear()
