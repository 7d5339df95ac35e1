"""A thread's lease, held for as long as a step runs.

The lease is short so a dead worker's thread is picked up soon; a step may run longer (a slow
model call, retried), so a heartbeat renews the lease while the step is alive. Without it the
reconciler would hand a long step's thread to a second worker and the model would be called
twice (the compare-and-swap would still keep one result)."""

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connections

from checkpoints.backends import get_backend

logger = logging.getLogger(__name__)

RENEWALS_PER_LEASE = 3


@contextmanager
def held_lease(*, thread_id: str, owner: str, ttl_s: float) -> Iterator[bool]:
    """Yield whether the lease was taken; while the block runs, keep renewing it."""
    backend = get_backend()
    if not backend.claim(thread_id=thread_id, owner=owner, ttl_s=ttl_s):
        yield False
        return
    stop = threading.Event()
    heartbeat = threading.Thread(
        target=_renew,
        kwargs={"thread_id": thread_id, "owner": owner, "ttl_s": ttl_s, "stop": stop},
        name=f"lease-{thread_id}",
        daemon=True,
    )
    heartbeat.start()
    try:
        yield True
    finally:
        stop.set()
        heartbeat.join()
        backend.release(thread_id=thread_id, owner=owner)


def _renew(*, thread_id: str, owner: str, ttl_s: float, stop: threading.Event) -> None:
    try:
        while not stop.wait(ttl_s / RENEWALS_PER_LEASE):
            if not get_backend().claim(thread_id=thread_id, owner=owner, ttl_s=ttl_s):
                logger.warning("worker %s lost its lease on thread %s", owner, thread_id)
                return
    except Exception:
        # The step goes on; at worst the lease lapses and the compare-and-swap settles it.
        logger.exception("could not renew the lease on thread %s", thread_id)
    finally:
        connections.close_all()  # this thread's own connections
