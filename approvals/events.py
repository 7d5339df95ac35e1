"""Pushes to open pages, always after the commit that caused them.

Inboxes share one group. An inbox event names the requests that changed and every queue they
touch (before and after a move); each socket skips events for queues its user cannot see and
sends its page only the changed rows (see approvals.inbox_push). Thread and decision pages join
their thread's group.
"""

import asyncio
import logging
import os
import threading
import uuid
from collections.abc import Callable, Coroutine
from typing import Any

from asgiref.sync import SyncToAsync, async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction

from approvals import selectors

INBOX_GROUP = "inbox"
log = logging.getLogger(__name__)


def thread_group(thread_id: str) -> str:
    # Group names allow only ASCII alphanumerics, hyphens, underscores and periods.
    return (
        "thread." + "".join(c if (c.isascii() and c.isalnum()) or c in "-_." else "_" for c in thread_id)[:90]
    )


def on_commit(fn: Callable[[], None]) -> None:
    """Run fn after the commit; a push that fails (Redis down) is logged, never undoes the commit."""
    transaction.on_commit(fn, robust=True)


PUSH_TIMEOUT_S = 10


class _PushLoop:
    """One event loop per process for pushes from plain threads (Celery workers, scripts).

    async_to_sync outside an ASGI server starts a thread and an event loop per call, and the
    Redis layer opens a connection per loop: a connect per push, per step. This loop keeps
    one Redis connection pool for the process's life.
    """

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, name="gatehouse-push", daemon=True).start()

    def run(self, coroutine: Coroutine[Any, Any, None]) -> None:
        future = asyncio.run_coroutine_threadsafe(coroutine, self.loop)
        try:
            future.result(PUSH_TIMEOUT_S)
        except TimeoutError:
            future.cancel()
            raise


_push_loop: _PushLoop | None = None
_push_loop_lock = threading.Lock()


def _loop() -> _PushLoop:
    global _push_loop
    with _push_loop_lock:
        if _push_loop is None or _push_loop.pid != os.getpid():  # a forked child starts its own
            _push_loop = _PushLoop()
        return _push_loop


def _lent_by_server() -> bool:
    """Is this a thread an ASGI server lent to sync code? asgiref then uses the server's loop."""
    threadlocal = SyncToAsync.threadlocal
    return getattr(threadlocal, "main_event_loop_pid", None) == os.getpid() and bool(
        getattr(threadlocal, "main_event_loop", None)
    )


def _send(group: str, message: dict[str, Any]) -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    if _lent_by_server():
        async_to_sync(layer.group_send)(group, message)
    else:
        _loop().run(layer.group_send(group, message))


def send_inbox_changed(*, queues: list[str], request_ids: list[int]) -> None:
    # The id lets each process load the changed rows once for all its sockets.
    message = {"type": "inbox.changed", "event": uuid.uuid4().hex, "queues": sorted(set(queues))}
    _send(INBOX_GROUP, {**message, "request_ids": sorted(set(request_ids))})


# The callers pass the routes of the rows they just wrote (selectors.RequestRoute.of): a queue
# that changes later sends its own event, so a push needs no read of its own.
def send_requests_opened(*, requests: list[selectors.RequestRoute]) -> None:
    send_inbox_changed(queues=[r.queue for r in requests], request_ids=[r.pk for r in requests])


def send_requests_closed(*, requests: list[selectors.RequestRoute]) -> None:
    send_inbox_changed(queues=[r.queue for r in requests], request_ids=[r.pk for r in requests])
    for request_ in requests:
        _send(thread_group(request_.thread_id), {"type": "approval.closed", "request_id": request_.pk})


def send_request_changed(*, request: selectors.RequestRoute, queues: list[str]) -> None:
    """A claim or a queue changed: inboxes and the request's decision page update."""
    send_inbox_changed(queues=queues, request_ids=[request.pk])
    _send(thread_group(request.thread_id), {"type": "approval.changed", "request_id": request.pk})


def on_thread_changed(sender: Any, *, thread_id: str, **kwargs: Any) -> None:
    try:
        _send(thread_group(thread_id), {"type": "thread.changed", "thread_id": thread_id})
    except Exception:  # a page missing one refresh is better than a step failing after commit
        log.exception("could not push thread.changed for %s", thread_id)
