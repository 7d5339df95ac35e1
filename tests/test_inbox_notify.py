"""Notifications through a real Celery worker: email through Django's email framework, a signed
webhook that fails once and is retried, and a notice when a request is escalated.

The worker here listens only on its own queue (NOTIFY_QUEUE), with the notifiers' settings in
its environment, so the session's worker never picks these tasks up.
"""

import hashlib
import hmac
import json
import socket
import sys
import threading
import uuid
from collections.abc import Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest
from django.test import override_settings
from django.utils import timezone

from agents.tools import Expiry
from approvals.actions.expiry import do_expire_due
from approvals.tests.helpers import gate_with_expiry
from tests.live import LiveServices, live_workers, wait_for

pytestmark = pytest.mark.django_db(transaction=True)

SECRET = "webhook-secret-for-tests"
NOTIFIERS = ["approvals.notifiers.email.EmailNotifier", "approvals.notifiers.webhook.WebhookNotifier"]


class Hook(BaseHTTPRequestHandler):
    """Records each delivery; answers 500 while `failures` lasts, then 204."""

    deliveries: list[tuple[dict[str, str], bytes]] = []
    failures = 0

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        Hook.deliveries.append((dict(self.headers), body))
        failing = Hook.failures > 0
        Hook.failures -= 1
        self.send_response(500 if failing else 204)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def hook() -> Iterator[str]:
    Hook.deliveries, Hook.failures = [], 1
    server = HTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}/gatehouse"
    server.shutdown()


@pytest.fixture
def notify_queue(live_services: LiveServices, hook: str, tmp_path: Path) -> Iterator[str]:
    """A worker consuming only a fresh queue, configured like a production notifier worker."""
    queue, node = f"notify-{uuid.uuid4().hex[:8]}", f"notify-{uuid.uuid4().hex[:6]}@{socket.gethostname()}"
    env = {
        "NOTIFY_WEBHOOK_URL": hook,
        "NOTIFY_WEBHOOK_SECRET": SECRET,
        "NOTIFY_RETRY_BASE_S": "0.5",
        "NOTIFY_EMAIL_TO": "reviewers@example.com",
        "EMAIL_BACKEND": "django.core.mail.backends.filebased.EmailBackend",
        "EMAIL_FILE_PATH": str(tmp_path / "mail"),
    }
    command = [
        *(sys.executable, "-m", "celery", "-A", "config", "worker", "-l", "info", "-n", node, "-Q", queue),
        *("--concurrency", "1", "--without-gossip", "--without-mingle", "--without-heartbeat"),
    ]
    worker = live_services.spawn("worker-notify", command, env)
    wait_for(lambda: node in live_workers(), timeout=30, interval=0.2, message="the notify worker")
    with override_settings(GATEHOUSE_NOTIFIERS=NOTIFIERS, NOTIFY_QUEUE=queue):
        yield queue
    live_services.stop(worker)


def events_received() -> list[dict[str, Any]]:
    return [json.loads(body) for _, body in Hook.deliveries]


def test_a_new_request_is_emailed_and_posted_signed_and_a_failed_post_is_retried(
    notify_queue: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    request_ = gate_with_expiry(monkeypatch, None)

    wait_for(lambda: len(Hook.deliveries) == 2, timeout=30, message="a failed delivery and its retry")
    for headers, body in Hook.deliveries:
        assert (
            headers["X-Gatehouse-Signature"]
            == "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
        )
    first, retry = events_received()
    assert first["delivery_id"] == retry["delivery_id"]  # the same notification, sent again
    assert (retry["event"], retry["approval"]["id"]) == ("approval.pending", request_.pk)

    mail = wait_for(lambda: list((tmp_path / "mail").glob("*.log")), timeout=15, message="the email")
    text = mail[0].read_text()
    assert "To: reviewers@example.com" in text and "Waiting in refunds: issue_refund" in text


def test_an_escalation_is_notified(notify_queue: str, monkeypatch: pytest.MonkeyPatch) -> None:
    Hook.failures = 0
    request_ = gate_with_expiry(monkeypatch, Expiry(60, "escalate", to_queue="supervisors"))
    wait_for(lambda: len(Hook.deliveries) == 1, timeout=30, message="the pending notice")

    do_expire_due(now=timezone.now() + timedelta(seconds=61))

    wait_for(lambda: len(Hook.deliveries) == 2, timeout=30, message="the escalation notice")
    escalated = events_received()[1]
    assert escalated["event"] == "approval.escalated"
    assert (escalated["approval"]["id"], escalated["approval"]["queue"]) == (request_.pk, "supervisors")
    assert escalated["approval"]["escalated_from"] == "refunds"
