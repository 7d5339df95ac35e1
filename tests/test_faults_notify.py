"""A notification receiver that accepts the connection and never answers delays no run: the
notification waits in its own queue's worker (what `serve` starts), never in a step worker.

Redis restarted empty, or down when a gate opens, loses no notification: beat's sweep resends
the gate's notice from its outbox row once Redis is back (a private redis-server, its own web
server, workers and beat; the shared Redis is left alone)."""

import json
import shutil
import socket
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest
from django.conf import settings

from agents.management.commands.serve import child_commands, child_env, notify_worker_options
from approvals.actions.tokens import do_create_token
from approvals.models import ApprovalRequest, NoticeStatus, OutboxNotice
from checkpoints.models import Thread
from tests.factories import make_user
from tests.live import (
    LiveServices,
    PrivateRedis,
    Workers,
    free_port,
    live_env,
    log_dir,
    reach,
    start_thread,
    thread_status,
    wait_for,
)

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


class Hook:
    """A webhook receiver that records every body it is sent."""

    def __init__(self) -> None:
        bodies: list[dict[str, Any]] = []

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                bodies.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.bodies = bodies
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@dataclass
class Stack:
    services: LiveServices
    redis: PrivateRedis
    hook: Hook

    def spawn_worker(self, name: str, *options: str, extra_env: dict[str, str] | None = None) -> None:
        command = [sys.executable, "-m", "celery", "-A", "config", "worker", "-l", "info", "-n", f"{name}@%h"]
        worker = self.services.spawn(name, [*command, *options], extra_env)
        log = self.services.logs[worker.pid]
        wait_for(lambda: "ready." in log.read_text(errors="replace"), timeout=30, message=name)

    def start_thread(self, token: str) -> str:
        with httpx.Client(base_url=f"{self.services.url}/api", timeout=30) as client:
            answer = client.post(
                "/threads",
                json={"agent": "refunds", "input": "Please refund order ORD-1001"},
                headers={"Authorization": f"Bearer {token}"},
            )
        assert answer.status_code in (200, 201), answer.text
        return str(answer.json()["id"])


@pytest.fixture
def stack(redis_ready: str, request: pytest.FixtureRequest) -> Iterator[Stack]:
    """A web server, a step worker and beat on a private Redis, notifying a webhook; the sweep
    resends a notice unsent after 3 s (the shipped delay is the broker's visibility_timeout)."""
    private, hook, port = PrivateRedis("notify-redis"), Hook(), free_port()
    private.start()
    env = {
        **live_env(port, f"gatehouse-notify-{uuid.uuid4().hex[:8]}"),
        "REDIS_URL": private.url,
        "GATEHOUSE_NOTIFIERS": "approvals.notifiers.webhook.WebhookNotifier",
        "NOTIFY_WEBHOOK_URL": hook.url,
        "NOTIFY_WEBHOOK_SECRET": "s",
        "NOTIFY_RETRY_BASE_S": "1",
        "NOTIFY_RESEND_AFTER_S": "3",
        "INBOX_SWEEP_INTERVAL_S": "1",
        "RECONCILE_INTERVAL_S": "1",
        "THREAD_LEASE_S": "5",
        **getattr(request, "param", {}),
    }
    services = LiveServices(url=f"http://127.0.0.1:{port}", env=env)
    try:
        services.start_web(port)
        started = Stack(services=services, redis=private, hook=hook)
        started.spawn_worker("notify-steps", "-c", "1")
        schedule = log_dir() / f"beat-{port}"
        services.spawn(
            "notify-beat", [sys.executable, "-m", "celery", "-A", "config", "beat", "-s", str(schedule)]
        )
        yield started
    finally:
        services.stop_all()
        private.stop()
        hook.server.shutdown()
        shutil.rmtree(settings.VAR_DIR / f"redis-{private.port}", ignore_errors=True)


def start_notify_worker(stack: Stack) -> None:
    stack.spawn_worker("notify-notify", *notify_worker_options(), extra_env=child_env("notify"))


def assert_told_once(stack: Stack, thread_id: str) -> None:
    """The receiver got the gate's notice, by its one delivery id (a rare resend is deduped by it)."""
    request_ = ApprovalRequest.objects.get(thread_id=thread_id)
    wait_for(lambda: stack.hook.bodies, timeout=30, message="the notice at the receiver")
    [notice] = OutboxNotice.objects.filter(request=request_)
    assert {(b["delivery_id"], b["approval"]["id"]) for b in stack.hook.bodies} == {
        (notice.delivery_id, request_.pk)
    }
    wait_for(
        lambda: OutboxNotice.objects.get(pk=notice.pk).status == NoticeStatus.SENT, timeout=10, message="sent"
    )
    assert ApprovalRequest.objects.get(pk=request_.pk).status == "pending"


@pytest.mark.slow
def test_a_notice_waiting_in_the_broker_when_redis_restarts_empty_is_resent_by_the_sweep(
    stack: Stack,
) -> None:
    token = do_create_token(user=make_user("ada", "admin"))
    thread_id = stack.start_thread(token)
    wait_for(lambda: thread_status(thread_id) == "waiting", timeout=45, message="the gate")
    wait_for(lambda: stack.redis.queued("notify") >= 1, timeout=10, message="the notice in the broker")

    stack.redis.stop()  # nobody consumed the notify queue yet
    stack.redis.start()  # empty
    start_notify_worker(stack)

    assert_told_once(stack, thread_id)


@pytest.mark.slow
@pytest.mark.parametrize("stack", [{"OFFLINE_MODEL_DELAY_MS": "3000"}], indirect=True)
def test_a_gate_opened_while_redis_is_down_is_notified_once_redis_is_back(stack: Stack) -> None:
    start_notify_worker(stack)
    token = do_create_token(user=make_user("ada", "admin"))
    thread_id = stack.start_thread(token)
    # The step worker is inside its first (slow) model call; its chain reaches the gate without Redis.
    wait_for(
        lambda: Thread.objects.filter(pk=thread_id, lease_owner__gt="").exists(), timeout=30, message="claim"
    )
    stack.redis.stop()
    wait_for(lambda: thread_status(thread_id) == "waiting", timeout=60, message="the gate, Redis down")
    time.sleep(2)
    assert stack.hook.bodies == []

    stack.redis.start()

    assert_told_once(stack, thread_id)
