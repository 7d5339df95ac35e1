"""Notifiers: the email and webhook backends, and that a failing one never blocks a run."""

import hashlib
import hmac
import json
import logging
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

import httpx
import pytest
from django.core import mail
from django.test import override_settings

from approvals import tasks
from approvals.actions import notify
from approvals.notifiers import BaseNotifier, Notification
from approvals.notifiers.email import EmailNotifier
from approvals.notifiers.webhook import WebhookNotifier, sign
from approvals.tasks import backoff_s
from tests.factories import make_gate, make_user

pytestmark = pytest.mark.django_db


class Receiver(BaseHTTPRequestHandler):
    """Records each POST; answers with the next queued status (200 when none is left)."""

    received: list[tuple[dict[str, str], bytes]] = []
    statuses: list[int] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        type(self).received.append((dict(self.headers), body))
        self.send_response(type(self).statuses.pop(0) if type(self).statuses else 200)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[str]:
    Receiver.received, Receiver.statuses = [], []
    server = HTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}/hook"
    server.shutdown()


def notification_for_new_gate() -> Notification:
    request_ = make_gate()
    found = notify.build_notification(event=notify.PENDING, request_id=request_.pk, delivery_id="d-1")
    assert found is not None
    return found


def test_the_webhook_posts_json_signed_with_hmac_sha256(receiver: str) -> None:
    notification = notification_for_new_gate()

    with override_settings(NOTIFY_WEBHOOK_URL=receiver, NOTIFY_WEBHOOK_SECRET="s3cret"):
        WebhookNotifier().send(notification)

    [(headers, body)] = Receiver.received
    expected = "sha256=" + hmac.new(b"s3cret", body, hashlib.sha256).hexdigest()
    assert headers["X-Gatehouse-Signature"] == expected == sign(body, secret="s3cret")
    payload = json.loads(body)
    assert (payload["event"], payload["delivery_id"]) == ("approval.pending", "d-1")
    assert payload["approval"]["args"] == {"order_id": "ORD-1001", "amount_cents": 4250}
    assert payload["approval"]["url"].endswith(f"/approvals/{payload['approval']['id']}/")


def test_a_failing_webhook_raises_so_the_task_retries(receiver: str) -> None:
    notification = notification_for_new_gate()
    Receiver.statuses = [503]

    with (
        override_settings(NOTIFY_WEBHOOK_URL=receiver, NOTIFY_WEBHOOK_SECRET="s3cret"),
        pytest.raises(httpx.HTTPStatusError),
    ):
        WebhookNotifier().send(notification)


@override_settings(NOTIFY_EMAIL_TO=[])
def test_email_goes_to_reviewers_who_may_decide_the_queue() -> None:
    for user in (make_user("rita", "reviewer", queues=("refunds",)), make_user("sam", "reviewer")):
        user.email = f"{user.username}@example.com"
        user.save()

    EmailNotifier().send(notification_for_new_gate())

    [message] = mail.outbox
    assert message.to == ["rita@example.com"]
    assert message.subject == "[Gatehouse] Waiting in refunds: issue_refund"
    assert "Decide: http" in message.body and "amount_cents: 4250" in message.body


def test_retries_back_off_exponentially_up_to_ten_minutes() -> None:
    with override_settings(NOTIFY_RETRY_BASE_S=5):
        delays = [backoff_s(n) for n in (0, 1, 2, 20)]
    assert 4 <= delays[0] <= 6 and 8 <= delays[1] <= 12 and 16 <= delays[2] <= 24
    assert delays[3] == 600


def test_no_notification_for_a_request_already_decided() -> None:
    request_ = make_gate()
    request_.status = "approved"
    request_.save()

    assert notify.build_notification(event=notify.PENDING, request_id=request_.pk, delivery_id="x") is None


class Exploding(BaseNotifier):
    def send(self, notification: Notification) -> None:
        raise RuntimeError("boom")


@pytest.mark.django_db(transaction=True)
def test_a_broker_failure_while_notifying_does_not_undo_or_block_the_gate(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from approvals import tasks
    from approvals.models import ApprovalRequest

    def broker_down(*args: Any, **kwargs: Any) -> None:
        raise ConnectionError("broker unreachable")

    monkeypatch.setattr(tasks.notify_task, "apply_async", broker_down)
    monkeypatch.setattr("approvals.events.send_requests_opened", lambda **kwargs: None)
    with override_settings(GATEHOUSE_NOTIFIERS=["approvals.tests.test_notifiers.Exploding"]):
        request_ = make_gate()

    assert ApprovalRequest.objects.get(pk=request_.pk).status == "pending"


def test_a_notification_that_keeps_failing_is_given_up_after_notify_max_retries(
    receiver: str, caplog: pytest.LogCaptureFixture
) -> None:
    request_ = make_gate()
    Receiver.statuses = [503] * 10
    path = "approvals.notifiers.webhook.WebhookNotifier"
    webhook = {"NOTIFY_WEBHOOK_URL": receiver, "NOTIFY_WEBHOOK_SECRET": "s3cret", "NOTIFY_MAX_RETRIES": 2}

    with override_settings(**webhook), caplog.at_level(logging.ERROR, logger="approvals.tasks"):
        # Eagerly, each retry runs at once (no countdown): the first try, then two retries.
        result = tasks.notify_task.apply(args=(path, notify.PENDING, request_.pk, "d-1"))

    assert len(Receiver.received) == 3
    assert (result.state, result.result) == ("SUCCESS", False)  # given up: not failed, not retried again
    assert [r.getMessage() for r in caplog.records if "giving up" in r.getMessage()] == [
        f"giving up on {path} for request {request_.pk} after 3 tries"
    ]
