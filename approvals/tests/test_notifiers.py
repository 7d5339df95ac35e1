"""Notifiers: the email and webhook backends, and that a failing one never blocks a run."""

import hashlib
import hmac
import json
import logging
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

import pytest
from django.conf import settings
from django.core import mail
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import override_settings
from django.utils import timezone
from pytest_django.fixtures import DjangoCaptureOnCommitCallbacks, Settings

from agents.tools import Expiry
from approvals import tasks
from approvals.actions import notify
from approvals.actions.expiry import do_expire_due
from approvals.models import ApprovalRequest, NoticeStatus, OutboxNotice
from approvals.notifiers import BaseNotifier, Notification, webhook
from approvals.notifiers.email import EmailNotifier
from approvals.notifiers.webhook import WebhookNotifier, sign
from approvals.tasks import backoff_s
from approvals.tests.helpers import gate_with_expiry
from tests.factories import make_gate, make_user
from tests.test_faults_notify import BlackHole

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


def with_secrets(url: str) -> str:
    """The receiver's URL carrying a secret in each place a webhook URL can: userinfo, a
    Slack-style path token and a query token."""
    address = url.removeprefix("http://").removesuffix("/hook")
    return f"http://hookuser:USERINFO-SECRET@{address}/services/T0/B0/PATH-SECRET?token=QUERY-SECRET"


URL_SECRETS = ("USERINFO-SECRET", "PATH-SECRET", "QUERY-SECRET")


def test_a_failing_webhook_raises_naming_only_the_host_and_the_status(receiver: str) -> None:
    notification = notification_for_new_gate()
    Receiver.statuses = [503]

    with (
        override_settings(NOTIFY_WEBHOOK_URL=with_secrets(receiver), NOTIFY_WEBHOOK_SECRET="s3cret"),
        pytest.raises(webhook.WebhookFailed) as failed,
    ):
        WebhookNotifier().send(notification)

    assert str(failed.value) == "webhook to 127.0.0.1 answered 503"
    assert failed.value.__cause__ is None and failed.value.__context__ is None


def test_an_unreachable_webhook_raises_naming_only_the_host_and_the_error_class() -> None:
    notification = notification_for_new_gate()
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        url = with_secrets(f"http://127.0.0.1:{closed.getsockname()[1]}/hook")  # nobody listens

    with (
        override_settings(NOTIFY_WEBHOOK_URL=url, NOTIFY_WEBHOOK_SECRET="s3cret"),
        pytest.raises(webhook.WebhookFailed) as failed,
    ):
        WebhookNotifier().send(notification)

    assert str(failed.value) == "webhook to 127.0.0.1 failed: ConnectError"
    assert failed.value.__cause__ is None and failed.value.__suppress_context__  # httpx's quotes the URL


def test_a_webhook_url_carrying_secrets_is_never_logged_when_delivery_fails(
    receiver: str, caplog: pytest.LogCaptureFixture
) -> None:
    request_ = make_gate()
    Receiver.statuses = [503, 503]
    configured = {"NOTIFY_WEBHOOK_URL": with_secrets(receiver), "NOTIFY_WEBHOOK_SECRET": "s3cret"}

    with override_settings(**configured, NOTIFY_MAX_RETRIES=1), caplog.at_level(logging.DEBUG):
        # A retry (our warning, Celery's "Retry in") and giving up (our traceback).
        tasks.notify_task.apply(
            args=("approvals.notifiers.webhook.WebhookNotifier", notify.PENDING, request_.pk, "d")
        )

    assert len(Receiver.received) == 2
    assert "giving up" in caplog.text and "answered 503" in caplog.text
    assert [secret for secret in URL_SECRETS if secret in caplog.text] == []


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


@override_settings(CELERY_BROKER_TRANSPORT_OPTIONS={"visibility_timeout": 300})
def test_retries_back_off_exponentially_up_to_half_the_brokers_visibility_timeout() -> None:
    # A retry waits out its countdown unacknowledged: held past the visibility_timeout, the broker
    # would hand it out again and the notification would be sent twice.
    with override_settings(NOTIFY_RETRY_BASE_S=5):
        delays = [backoff_s(n) for n in (0, 1, 2, 20)]
    assert 4 <= delays[0] <= 6 and 8 <= delays[1] <= 12 and 16 <= delays[2] <= 24
    assert delays[3] == 150


def test_retries_back_off_ten_minutes_at_most_whatever_the_visibility_timeout() -> None:
    with override_settings(
        NOTIFY_RETRY_BASE_S=5, CELERY_BROKER_TRANSPORT_OPTIONS={"visibility_timeout": 7200}
    ):
        assert backoff_s(20) == 600


def test_check_refuses_a_first_backoff_longer_than_half_the_visibility_timeout() -> None:
    call_command("check")  # the shipped settings pass

    with (
        override_settings(
            NOTIFY_RETRY_BASE_S=200, CELERY_BROKER_TRANSPORT_OPTIONS={"visibility_timeout": 300}
        ),
        pytest.raises(SystemCheckError, match=r"approvals\.E001.*NOTIFY_RETRY_BASE_S \(200 s\)"),
    ):
        call_command("check")


@pytest.fixture
def silent_smtp() -> Iterator[BlackHole]:
    """A server that accepts every connection and never sends the SMTP greeting."""
    server = BlackHole()
    yield server
    server.close()


def test_an_email_to_an_smtp_server_that_never_greets_fails_after_email_timeout(
    settings: Settings, silent_smtp: BlackHole
) -> None:
    assert settings.EMAIL_TIMEOUT == 10  # the shipped default: Django's is None, to wait forever
    settings.EMAIL_TIMEOUT = 1
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", silent_smtp.port
    settings.NOTIFY_EMAIL_TO = ["ops@example.com"]
    notification = notification_for_new_gate()
    outcome: list[BaseException] = []

    def send() -> None:
        try:
            EmailNotifier().send(notification)
        except Exception as exc:  # the task retries it
            outcome.append(exc)

    started = time.monotonic()
    sender = threading.Thread(target=send, daemon=True)  # daemon: a hang fails the test, not the run
    sender.start()
    sender.join(10)

    assert not sender.is_alive(), "the send still waits on a server that never answers"
    assert time.monotonic() - started < 5
    [failure] = outcome
    assert silent_smtp.accepted and "timed out" in str(failure)


def test_a_pending_notice_still_retrying_when_its_request_escalates_is_dropped(
    monkeypatch: pytest.MonkeyPatch, django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks
) -> None:
    enqueued: list[tuple[tuple[Any, ...], dict[str, Any]]] = []
    monkeypatch.setattr(
        tasks.notify_task, "apply_async", lambda args, kwargs, **options: enqueued.append((args, kwargs))
    )
    monkeypatch.setattr("approvals.events.send_requests_opened", lambda **kwargs: None)
    monkeypatch.setattr("approvals.events.send_request_changed", lambda **kwargs: None)
    path = "approvals.notifiers.email.EmailNotifier"
    with override_settings(GATEHOUSE_NOTIFIERS=[path], NOTIFY_EMAIL_TO=["ops@example.com"]):
        with django_capture_on_commit_callbacks(execute=True):
            request_ = gate_with_expiry(monkeypatch, Expiry(60, "escalate", to_queue="supervisors"))
        # Its "approval.pending" notice is still being retried (receiver down) at the deadline.
        with django_capture_on_commit_callbacks(execute=True):
            do_expire_due(now=timezone.now() + timedelta(seconds=120))
        [pending, escalated] = enqueued

        for args, kwargs in (pending, escalated):
            tasks.notify_task.apply(args=args, kwargs=kwargs)

    assert args[:3] == (path, notify.ESCALATED, request_.pk)
    # Refunds' reviewers no longer can act on it; supervisors are told once, of the escalation.
    assert [m.subject for m in mail.outbox] == ["[Gatehouse] Escalated to supervisors: issue_refund"]
    assert list(OutboxNotice.objects.values_list("event", "event_queue", "status")) == [
        (notify.PENDING, "refunds", NoticeStatus.DROPPED),
        (notify.ESCALATED, "supervisors", NoticeStatus.SENT),
    ]


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


def test_a_notice_that_fails_to_enqueue_leaves_the_others_enqueued(
    monkeypatch: pytest.MonkeyPatch,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
    caplog: pytest.LogCaptureFixture,
) -> None:
    sent: list[tuple[Any, ...]] = []

    def broker_hiccup(args: tuple[Any, ...], kwargs: dict[str, Any], **options: Any) -> None:
        sent.append(args)
        if len(sent) == 1:
            raise ConnectionError("broker unreachable")

    monkeypatch.setattr(tasks.notify_task, "apply_async", broker_hiccup)
    monkeypatch.setattr("approvals.events.send_requests_opened", lambda **kwargs: None)
    email, webhook = "approvals.notifiers.email.EmailNotifier", "approvals.notifiers.webhook.WebhookNotifier"
    with (
        override_settings(GATEHOUSE_NOTIFIERS=[email, webhook]),
        caplog.at_level(logging.ERROR, logger="approvals.actions.notify"),
        django_capture_on_commit_callbacks(execute=True),
    ):
        request_ = make_gate()

    assert [args[:3] for args in sent] == [
        (email, notify.PENDING, request_.pk),  # refused
        (webhook, notify.PENDING, request_.pk),
    ]
    assert [r.getMessage() for r in caplog.records] == [
        f"could not enqueue {email}'s approval.pending notice of request {request_.pk}"
    ]


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


# --- The outbox: a notice is a row written with its event, marked by its task, resent by the sweep.

EMAIL = "approvals.notifiers.email.EmailNotifier"


def gate_with_lost_notices(
    monkeypatch: pytest.MonkeyPatch, captured: DjangoCaptureOnCommitCallbacks
) -> tuple[Any, list[tuple[Any, ...]]]:
    """A gate whose notice the broker refused at the commit (Redis down); what is enqueued later
    is kept (args) instead of being handed to a broker."""
    enqueued: list[tuple[Any, ...]] = []
    monkeypatch.setattr("approvals.events.send_requests_opened", lambda **kwargs: None)

    def broker_down(args: tuple[Any, ...], kwargs: dict[str, Any], **options: Any) -> None:
        raise ConnectionError("broker unreachable")

    monkeypatch.setattr(tasks.notify_task, "apply_async", broker_down)
    with captured(execute=True):
        request_ = make_gate()
    monkeypatch.setattr(
        tasks.notify_task,
        "apply_async",
        lambda args, kwargs, **options: enqueued.append((*args, kwargs["event_queue"])),
    )
    return request_, enqueued


def run_notify_task(args: tuple[Any, ...]) -> Any:
    *positional, event_queue = args
    return tasks.notify_task.apply(args=tuple(positional), kwargs={"event_queue": event_queue}).result


@override_settings(
    GATEHOUSE_NOTIFIERS=[EMAIL], NOTIFY_EMAIL_TO=["ops@example.com"], NOTIFY_RESEND_AFTER_S=300
)
def test_a_notice_the_broker_refused_at_the_commit_is_resent_by_the_sweep_once_unsent_long_enough(
    monkeypatch: pytest.MonkeyPatch, django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks
) -> None:
    request_, enqueued = gate_with_lost_notices(monkeypatch, django_capture_on_commit_callbacks)
    [notice] = OutboxNotice.objects.all()
    assert (notice.request_id, notice.notifier, notice.event, notice.status) == (
        request_.pk,
        EMAIL,
        notify.PENDING,
        NoticeStatus.QUEUED,
    )

    # Merely queued or retrying for a while: not resent.
    assert notify.do_sweep_notices(now=timezone.now() + timedelta(seconds=290)) == 0
    assert notify.do_sweep_notices(now=timezone.now() + timedelta(seconds=310)) == 1
    [resent] = enqueued
    assert resent == (EMAIL, notify.PENDING, request_.pk, notice.delivery_id, "refunds")
    assert run_notify_task(resent) is True

    [message] = mail.outbox
    assert message.extra_headers["X-Gatehouse-Delivery"] == notice.delivery_id
    notice.refresh_from_db()
    assert (notice.status, notice.tries, notice.finished_at is not None) == (NoticeStatus.SENT, 1, True)
    assert notify.do_sweep_notices(now=timezone.now() + timedelta(hours=1)) == 0  # sent: left alone


@override_settings(
    GATEHOUSE_NOTIFIERS=[EMAIL], NOTIFY_EMAIL_TO=["ops@example.com"], NOTIFY_RESEND_AFTER_S=300
)
def test_a_resent_copy_of_a_notice_already_sent_is_not_sent_again(
    monkeypatch: pytest.MonkeyPatch, django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks
) -> None:
    _, enqueued = gate_with_lost_notices(monkeypatch, django_capture_on_commit_callbacks)
    notify.do_sweep_notices(now=timezone.now() + timedelta(seconds=310))
    notify.do_sweep_notices(now=timezone.now() + timedelta(seconds=620))  # the first copy was slow
    [first, copy] = enqueued

    assert (run_notify_task(first), run_notify_task(copy)) == (True, False)
    assert len(mail.outbox) == 1


@override_settings(
    GATEHOUSE_NOTIFIERS=[EMAIL], NOTIFY_EMAIL_TO=["ops@example.com"], NOTIFY_RESEND_AFTER_S=300
)
def test_the_sweep_drops_instead_of_resending_an_unsent_notice_of_a_request_decided_meanwhile(
    monkeypatch: pytest.MonkeyPatch, django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks
) -> None:
    request_, enqueued = gate_with_lost_notices(monkeypatch, django_capture_on_commit_callbacks)
    ApprovalRequest.objects.filter(pk=request_.pk).update(status="approved")

    assert notify.do_sweep_notices(now=timezone.now() + timedelta(seconds=310)) == 0
    assert enqueued == []
    assert OutboxNotice.objects.get().status == NoticeStatus.DROPPED


def test_a_notice_that_keeps_failing_is_marked_given_up_and_never_resent(
    receiver: str,
    monkeypatch: pytest.MonkeyPatch,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    Receiver.statuses = [503] * 10
    webhook = {"NOTIFY_WEBHOOK_URL": receiver, "NOTIFY_WEBHOOK_SECRET": "s3cret", "NOTIFY_MAX_RETRIES": 1}
    path = "approvals.notifiers.webhook.WebhookNotifier"
    with override_settings(GATEHOUSE_NOTIFIERS=[path], **webhook):
        _, enqueued = gate_with_lost_notices(monkeypatch, django_capture_on_commit_callbacks)
        notify.do_sweep_notices(now=timezone.now() + timedelta(seconds=settings.NOTIFY_RESEND_AFTER_S + 1))
        [lost] = enqueued

        assert run_notify_task(lost) is False  # a try and a retry

        notice = OutboxNotice.objects.get()
        assert (notice.status, notice.tries) == (NoticeStatus.GAVE_UP, 2)
        assert notify.do_sweep_notices(now=timezone.now() + timedelta(days=1)) == 0
    assert len(Receiver.received) == 2 and len(enqueued) == 1


def test_the_sweep_deletes_notices_finished_a_week_ago_and_keeps_the_rest() -> None:
    request_, now = make_gate(), timezone.now()

    def notice(status: NoticeStatus, finished_days_ago: float | None) -> OutboxNotice:
        finished = now - timedelta(days=finished_days_ago) if finished_days_ago is not None else None
        return OutboxNotice.objects.create(
            request=request_,
            notifier=EMAIL,
            event=notify.PENDING,
            event_queue="refunds",
            delivery_id=uuid.uuid4().hex,
            status=status,
            touched_at=now,
            finished_at=finished,
        )

    for finished in (NoticeStatus.SENT, NoticeStatus.DROPPED, NoticeStatus.GAVE_UP):
        notice(finished, 8)
    kept = [notice(NoticeStatus.SENT, 6), notice(NoticeStatus.QUEUED, None)]

    with override_settings(GATEHOUSE_NOTIFIERS=[EMAIL], NOTIFY_RESEND_AFTER_S=10**6):
        notify.do_sweep_notices(now=now)

    assert set(OutboxNotice.objects.values_list("pk", flat=True)) == {n.pk for n in kept}


def test_check_refuses_a_resend_delay_no_longer_than_the_longest_retry_wait() -> None:
    with (
        override_settings(
            NOTIFY_RESEND_AFTER_S=150, CELERY_BROKER_TRANSPORT_OPTIONS={"visibility_timeout": 300}
        ),
        pytest.raises(SystemCheckError, match=r"approvals\.E002.*NOTIFY_RESEND_AFTER_S \(150 s\)"),
    ):
        call_command("check")
