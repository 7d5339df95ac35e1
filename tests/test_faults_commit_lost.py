"""A step's COMMIT lands in Postgres but its answer is lost with the connection: the worker sees an
OperationalError, its on-commit follow-up (the next step's enqueue, the pushes) never runs, and its
retry finds the head moved on. The thread must go on within seconds, as after a worker that dies
right after its commit, not after the reconciler's RECONCILE_QUEUED_AFTER_S (120 s).

Real processes: a Celery worker whose Postgres link goes through a proxy that forwards the step's
COMMIT, swallows the reply and cuts the connection; Redis; the test database."""

import contextlib
import socket
import threading
import time
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest

from agents.examples.models import Refund
from checkpoints.models import Checkpoint
from tests.live import (
    Workers,
    approve_pending,
    database_url_for_tests,
    history_is_one_chain,
    reach,
    start_thread,
    wait_for,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow, pytest.mark.postgres_only]


class CommitCutter:
    """Forwards to Postgres. On the first COMMIT of a connection that sent `trigger` (the step's
    checkpoint INSERT), forwards the COMMIT, drops the server's reply and cuts both sockets."""

    def __init__(self, *, target_port: int, trigger: bytes) -> None:
        self.target_port, self.trigger = target_port, trigger
        self.fired = threading.Event()
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.server.getsockname()[1])
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.server.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
                upstream = socket.create_connection(("127.0.0.1", self.target_port))
            except OSError:
                return
            cut = threading.Event()
            threading.Thread(target=self._up, args=(client, upstream, cut), daemon=True).start()
            threading.Thread(target=self._down, args=(upstream, client, cut), daemon=True).start()

    def _up(self, client: socket.socket, upstream: socket.socket, cut: threading.Event) -> None:
        armed = False
        with contextlib.suppress(OSError):
            while data := client.recv(65536):
                armed = armed or (self.trigger in data and not self.fired.is_set())
                if armed and b"COMMIT\x00" in data and not self.fired.is_set():
                    self.fired.set()
                    cut.set()  # from now on the server's replies go nowhere
                    upstream.sendall(data)
                    time.sleep(0.5)  # the server commits and answers
                    for sock in (client, upstream):
                        with contextlib.suppress(OSError):
                            sock.shutdown(socket.SHUT_RDWR)
                            sock.close()
                    return
                upstream.sendall(data)

    def _down(self, upstream: socket.socket, client: socket.socket, cut: threading.Event) -> None:
        with contextlib.suppress(OSError):
            while data := upstream.recv(65536):
                if not cut.is_set():
                    client.sendall(data)


def test_a_step_whose_commit_reply_is_lost_goes_on_within_seconds_and_runs_once(
    workers: Workers, settings: Any
) -> None:
    # The default, as beat runs it: only a follow-up from the worker moves the thread in time.
    settings.RECONCILE_QUEUED_AFTER_S = 120
    url = urlsplit(database_url_for_tests())
    cutter = CommitCutter(
        target_port=url.port or 5432, trigger=f"INSERT INTO {Checkpoint._meta.db_table} ".encode()
    )
    proxied = urlunsplit(
        url._replace(netloc=f"{url.username}@127.0.0.1:{cutter.port}", query="sslmode=disable")
    )
    try:
        # One step per task, as a resumed step runs: the next step must be sent through the broker.
        workers.start("cut", {"DATABASE_URL": proxied, "STEP_CHAIN_S": "0", "THREAD_LEASE_S": "4"})
        thread_id = start_thread("Please refund order ORD-1001")
        wait_for(cutter.fired.is_set, timeout=30, message="the first step's COMMIT")
        wait_for(
            lambda: Checkpoint.objects.filter(thread_id=thread_id, step=1).exists(),
            timeout=5,
            message="the cut COMMIT to have landed",
        )

        reach(thread_id, "waiting", timeout=20)  # it stayed running for 120 s before
        assert Checkpoint.objects.filter(thread_id=thread_id, step=1).count() == 1
        approve_pending(thread_id)
        reach(thread_id, "done")
    finally:
        cutter.close()  # the worker's later connections go through it too
    assert list(Refund.objects.filter(thread_id=thread_id).values_list("order_id", flat=True)) == ["ORD-1001"]
    assert history_is_one_chain(thread_id)
