"""Count a process's SQL queries into a file, for benchmarks and tests (off unless asked for).

With QUERY_COUNT_FILE set, every query this process runs appends one byte to that file, so another
process reads the count as the file's size (appends of one byte are atomic across threads).
"""

import os
from collections.abc import Callable
from typing import Any

from django.db.backends.signals import connection_created


def install_from_env() -> None:
    path = os.environ.get("QUERY_COUNT_FILE")
    if path:
        connection_created.connect(
            _wrapper_for(os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)), weak=False
        )


def _wrapper_for(fd: int) -> Callable[..., None]:
    def count(execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any) -> Any:
        os.write(fd, b".")
        return execute(sql, params, many, context)

    def on_connect(sender: Any, connection: Any, **kwargs: Any) -> None:
        if count not in connection.execute_wrappers:  # a reconnect reuses the wrapper object
            connection.execute_wrappers.append(count)

    return on_connect


def read(path: str) -> int:
    """The count so far (0 before the first query)."""
    return os.path.getsize(path) if os.path.exists(path) else 0
