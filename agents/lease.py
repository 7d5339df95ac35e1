"""A thread's lease, held for as long as a step runs.

The lease is short so a dead worker's thread is picked up soon; a step may run longer (a slow
model call, retried), so a heartbeat renews the lease while the step is alive. Without it the
reconciler would hand a long step's thread to a second worker and the model would be called
twice (the compare-and-swap would still keep one result).

One heartbeat per process renews every lease the process holds with one UPDATE: a thread-pool
worker runs hundreds of steps at once, and a thread and a connection per step would cost more
than the steps' own queries."""

import logging
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connections

from checkpoints.backends import get_backend
from checkpoints.backends.base import Claim

logger = logging.getLogger(__name__)

RENEWALS_PER_LEASE = 3


class _Heartbeat:
    """The process's held leases (owner -> ttl) and the one thread that renews them."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.held: dict[str, float] = {}
        self.wake = threading.Event()
        self.waiting_ttl: float | None = None
        self.pid = 0

    def add(self, owner: str, ttl_s: float) -> None:
        with self.lock:
            self.held[owner] = ttl_s
            if self.pid != os.getpid():  # first lease in this process (or a forked child)
                self.pid = os.getpid()
                threading.Thread(target=self._run, name="lease-heartbeat", daemon=True).start()
            if self.waiting_ttl is None or ttl_s < self.waiting_ttl:
                self.wake.set()  # the first lease, or a shorter one: recompute the wait

    def remove(self, owner: str) -> None:
        with self.lock:
            self.held.pop(owner, None)

    def _run(self) -> None:
        while True:
            with self.lock:
                self.waiting_ttl = ttl = min(self.held.values(), default=None)
            if self.wake.wait(None if ttl is None else ttl / RENEWALS_PER_LEASE):
                self.wake.clear()
                continue
            self.renew()

    def renew(self) -> None:
        """Extend every held lease by its ttl; a lease taken over meanwhile is left alone."""
        with self.lock:
            by_ttl: dict[float, list[str]] = {}
            for owner, ttl in self.held.items():
                by_ttl.setdefault(ttl, []).append(owner)
        try:
            for ttl, owners in by_ttl.items():
                renewed = get_backend().renew(owners=owners, ttl_s=ttl)
                if renewed < len(owners):
                    logger.warning("%d of %d leases were lost", len(owners) - renewed, len(owners))
        except Exception:
            # The steps go on; at worst a lease lapses and the compare-and-swap settles it.
            logger.exception("could not renew %d leases", sum(map(len, by_ttl.values())))
        finally:
            connections.close_all()  # this thread's connection goes back (to the pool, if any)


_heartbeat = _Heartbeat()


@contextmanager
def held_lease(*, thread_id: str, owner: str, ttl_s: float) -> Iterator[Claim | None]:
    """Yield the claim (the thread as its lease was taken), or None if it was not; while the
    block runs, keep renewing the lease."""
    backend = get_backend()
    claim = backend.claim(thread_id=thread_id, owner=owner, ttl_s=ttl_s)
    if claim is None:
        yield None
        return
    _heartbeat.add(owner, ttl_s)
    try:
        yield claim
    finally:
        _heartbeat.remove(owner)
        backend.release(thread_id=thread_id, owner=owner)
