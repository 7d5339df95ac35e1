"""A notification receiver that accepts the connection and never answers delays no run: the
notification waits in its own queue's worker (what `serve` starts), never in a step worker."""

import socket
import threading
import time
from collections.abc import Iterator

import pytest

from agents.management.commands.serve import child_commands
from tests.live import Workers, reach, start_thread, thread_status, wait_for

pytestmark = pytest.mark.django_db(transaction=True)


class BlackHole:
    """A TCP server that accepts every connection and never sends a byte."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}/hook"
        self.accepted: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self.server.accept()
            except OSError:
                return
            self.accepted.append(connection)  # held open, unanswered

    def close(self) -> None:
        for sock in [self.server, *self.accepted]:
            sock.close()


@pytest.fixture
def black_hole() -> Iterator[BlackHole]:
    hole = BlackHole()
    yield hole
    hole.close()


@pytest.mark.slow
def test_a_receiver_that_never_answers_delays_no_run_and_is_still_attempted(
    workers: Workers, black_hole: BlackHole
) -> None:
    # No NOTIFY_QUEUE: the default routing, as `make run` has it.
    env = {
        "GATEHOUSE_NOTIFIERS": "approvals.notifiers.webhook.WebhookNotifier",
        "NOTIFY_WEBHOOK_URL": black_hole.url,
        "NOTIFY_WEBHOOK_SECRET": "secret",
        "NOTIFY_RETRY_BASE_S": "1",
    }
    workers.start("steps", env)  # one process: a notification on it would hold every step
    workers.start_notify("notify", env)
    first = start_thread("Please refund order ORD-1001")
    reach(first, "waiting", reconcile=False)
    # The first gate's notification is now waiting on the receiver (5 s timeout, then retries).
    wait_for(lambda: black_hole.accepted, timeout=20, message="the notification to be attempted")

    started = time.monotonic()
    second = start_thread("Please refund order ORD-1002")
    wait_for(lambda: thread_status(second) == "waiting", timeout=60, interval=0.05, message="the gate")

    assert time.monotonic() - started < 3
    # Retried with backoff after the timeout, by the notify worker.
    wait_for(lambda: len(black_hole.accepted) >= 3, timeout=30, message="the notifications and a retry")


def test_make_run_starts_a_thread_pool_worker_for_the_notify_queue_and_steps_never_take_it() -> None:
    commands = child_commands(8000)

    notify = commands["notify"]
    assert notify[notify.index("-Q") + 1] == "notify"
    assert notify[notify.index("--pool") + 1] == "threads"
    assert "-Q" not in commands["worker1"]  # the default queue only
