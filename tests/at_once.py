"""Two things at once against the real database: a call run in another thread (with its own
connection, closed when it ends), and whether a session waits on a row lock another holds."""

import threading
from collections.abc import Callable
from typing import Any

from django.db import connection


def in_thread(fn: Callable[[], Any], outcome: dict[str, Any]) -> threading.Thread:
    """Start `fn` in a thread; its result lands in outcome["result"], or its exception in
    outcome["error"]."""

    def run() -> None:
        try:
            outcome["result"] = fn()
        except Exception as exc:
            outcome["error"] = exc
        finally:
            connection.close()

    worker = threading.Thread(target=run)
    worker.start()
    return worker


def waiting_for_a_lock(pid: int) -> bool:
    """Whether the Postgres backend `pid` is waiting on a lock (held by another session)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", [pid])
        row = cursor.fetchone()
    return row is not None and row[0] == "Lock"
