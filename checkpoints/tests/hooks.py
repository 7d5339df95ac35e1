"""What the contract suite needs each backend's tests to do behind the backend's back."""

from datetime import datetime
from typing import Any


class Hooks:
    def corrupt(self, backend: Any, thread_id: str, checkpoint_id: str) -> None:
        """Change a stored checkpoint's field references."""
        raise NotImplementedError("subclasses of BackendContract must provide corrupt()")

    def stored_values(self, backend: Any, thread_id: str) -> dict[bytes, str]:
        """The thread's stored values and list items: key -> stored data."""
        raise NotImplementedError("subclasses of BackendContract must provide stored_values()")

    def tamper(self, backend: Any, thread_id: str, key: bytes, data: str) -> None:
        """Overwrite the stored data of one value or list item."""
        raise NotImplementedError("subclasses of BackendContract must provide tamper()")

    def delete_row(self, backend: Any, thread_id: str, key: bytes) -> None:
        """Delete the stored row of one value or list item."""
        raise NotImplementedError("subclasses of BackendContract must provide delete_row()")

    def stored_texts(self, backend: Any) -> list[str]:
        """Every stored value, list item, pending write and store item, as stored."""
        raise NotImplementedError("subclasses of BackendContract must provide stored_texts()")

    def backdate(self, backend: Any, thread_id: str, checkpoint_id: str, created_at: datetime) -> None:
        """Pretend a checkpoint was written at created_at."""
        raise NotImplementedError("subclasses of BackendContract must provide backdate()")
