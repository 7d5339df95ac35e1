"""Pushes to open pages, always after the commit that caused them.

Inboxes share one group. An inbox event names the requests that changed and every queue they
touch (before and after a move); each socket skips events for queues its user cannot see and
sends its page only the changed rows (see approvals.inbox_push). Thread and decision pages join
their thread's group.
"""

import asyncio
import functools
import hashlib
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable, Coroutine
from typing import Any

import redis
from asgiref.sync import SyncToAsync, async_to_sync
from channels.layers import BaseChannelLayer, get_channel_layer
from django.db import transaction

from approvals import selectors
from approvals.models import ApprovalRequest, ApprovalStatus

INBOX_GROUP = "inbox"
log = logging.getLogger(__name__)


def thread_group(thread_id: str) -> str:
    # Group names allow only ASCII alphanumerics, hyphens, underscores and periods, under 100
    # characters: a digest of the id, since any mapping of its characters joins two threads'
    # pages ("acme:42" and "acme_42") and one would receive the other's pushes.
    return "thread." + hashlib.sha256(thread_id.encode()).hexdigest()


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


@functools.cache
def _redis(address: str) -> redis.Redis:
    """A plain client for one of the layer's servers, shared by this process's threads."""
    return redis.Redis.from_url(address, socket_timeout=PUSH_TIMEOUT_S, socket_connect_timeout=PUSH_TIMEOUT_S)


def _listened(layer: BaseChannelLayer, group: str) -> bool:
    """Has the group a member that joined within the layer's group expiry (an open page re-joins
    every LIVE_REJOIN_S)? One read on the calling thread: most pushes are a step's thread.changed
    for a thread page nobody has open, and the layer's group_send takes two round trips on the
    event loop to find no one (about a tenth of a step worker's CPU per step, measured). A page
    that joins just after this read misses the event as it would miss one sent just before; it
    renders the current state when it opens. Layers other than channels_redis on an address are
    always sent to."""
    hosts = getattr(layer, "hosts", None)
    if not hosts or not hasattr(layer, "_group_key"):
        return True
    host = hosts[layer.consistent_hash(group)]
    if "address" not in host:  # a sentinel
        return True
    oldest = time.time() - layer.group_expiry
    key = layer._group_key(group)
    return bool(_redis(host["address"]).zrangebyscore(key, oldest, "+inf", start=0, num=1))


def _send(group: str, message: dict[str, Any]) -> None:
    layer = get_channel_layer()
    if layer is None or not _listened(layer, group):
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


def send_thread_deleted(*, thread_id: str, deleted_by: str) -> None:
    """The thread is gone: its open pages say who deleted it in place of their panel and
    buttons (which would only 404 now), and their sockets close."""
    _send(thread_group(thread_id), {"type": "thread.deleted", "deleted_by": deleted_by})


def on_thread_changed(
    sender: Any, *, thread_id: str, checkpoint_id: str | None = None, resent: bool = False, **kwargs: Any
) -> None:
    try:
        _send(thread_group(thread_id), {"type": "thread.changed", "thread_id": thread_id})
        if resent and checkpoint_id:
            # The step's own push of the gates it opened may have been lost with its connection
            # (agents.runtime.run_step): open inboxes are told again; one that has them re-renders.
            pending = ApprovalRequest.objects.filter(
                thread_id=thread_id, checkpoint_id=checkpoint_id, status=ApprovalStatus.PENDING
            )
            if opened := [selectors.RequestRoute.of(r) for r in pending]:
                send_requests_opened(requests=opened)
    except Exception:  # a page missing one refresh is better than a step failing after commit
        log.exception("could not push thread.changed for %s", thread_id)
