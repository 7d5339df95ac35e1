"""The one rule for thread ids and tenants, checked by every way a thread is created.

Ids appear in URLs (`/threads/<id>/`), WebSocket paths and group names, so they must reverse
into a URL and survive a round trip through a path segment. A tenant (the thread's cross-thread
store namespace, checkpoints/store.py) follows the same rule, so it is as safe to show and link.
"""

import re

THREAD_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,99}")
THREAD_ID_RULE = "use 1-100 letters, digits, '.', '_', ':' or '-', starting with a letter or digit"


class InvalidThreadId(ValueError):
    """A thread id that breaks the rule; nothing was written."""

    def __init__(self, thread_id: object) -> None:
        super().__init__(f"thread id {str(thread_id)[:120]!r}: {THREAD_ID_RULE}")
        self.thread_id = thread_id


def is_valid_thread_id(thread_id: object) -> bool:
    return isinstance(thread_id, str) and THREAD_ID.fullmatch(thread_id) is not None


def check_thread_id(thread_id: object) -> str:
    """Return thread_id if it follows the rule, else raise InvalidThreadId."""
    if not is_valid_thread_id(thread_id):
        raise InvalidThreadId(thread_id)
    return thread_id  # type: ignore[return-value]


def is_valid_tenant(tenant: object) -> bool:
    """A tenant follows the thread id rule (THREAD_ID_RULE)."""
    return is_valid_thread_id(tenant)
