"""A notice is claimed by the try that sends it: a resent copy run while another try is sending
it never sends it too (an email receiver cannot drop a duplicate by its delivery id), and a try
that died mid-send is resent by the sweep once NOTIFY_RESEND_AFTER_S has passed."""

from collections.abc import Callable
from datetime import timedelta
from typing import Any, ClassVar

import pytest
from django.test import override_settings
from django.utils import timezone
from pytest_django.fixtures import DjangoCaptureOnCommitCallbacks

from approvals.actions import notify
from approvals.models import NoticeStatus, OutboxNotice
from approvals.notifiers import BaseNotifier, Notification
from approvals.tests.test_notifiers import gate_with_lost_notices, run_notify_task

pytestmark = pytest.mark.django_db

SLOW = "approvals.tests.test_notice_claims.Slow"


class Slow(BaseNotifier):
    """Records each delivery; `during_send` runs in the middle of the first one, as another
    worker thread would while this one waits on the receiver."""

    sent: ClassVar[list[str]] = []
    during_send: ClassVar[Callable[[], Any] | None] = None

    def send(self, notification: Notification) -> None:
        meanwhile, type(self).during_send = type(self).during_send, None
        if meanwhile is not None:
            meanwhile()
        type(self).sent.append(notification.delivery_id)


@pytest.fixture(autouse=True)
def fresh_slow() -> None:
    Slow.sent, Slow.during_send = [], None


@override_settings(GATEHOUSE_NOTIFIERS=[SLOW], NOTIFY_RESEND_AFTER_S=300)
def test_a_resent_copy_run_while_another_try_is_sending_the_notice_does_not_send_it(
    monkeypatch: pytest.MonkeyPatch, django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks
) -> None:
    _, enqueued = gate_with_lost_notices(monkeypatch, django_capture_on_commit_callbacks)
    notify.do_sweep_notices(now=timezone.now() + timedelta(seconds=310))
    notify.do_sweep_notices(now=timezone.now() + timedelta(seconds=620))  # the notify worker was down
    [first, copy] = enqueued
    copy_results: list[Any] = []
    Slow.during_send = lambda: copy_results.append(run_notify_task(copy))

    assert run_notify_task(first) is True

    assert copy_results == [False]  # skipped: the first try held the claim
    [notice] = OutboxNotice.objects.all()
    assert Slow.sent == [notice.delivery_id]
    assert (notice.status, notice.tries) == (NoticeStatus.SENT, 1)


@override_settings(GATEHOUSE_NOTIFIERS=[SLOW], NOTIFY_RESEND_AFTER_S=300)
def test_a_notice_whose_try_died_mid_send_is_resent_by_the_sweep_after_notify_resend_after_s(
    monkeypatch: pytest.MonkeyPatch, django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks
) -> None:
    _, enqueued = gate_with_lost_notices(monkeypatch, django_capture_on_commit_callbacks)
    notify.do_sweep_notices(now=timezone.now() + timedelta(seconds=310))
    [first] = enqueued

    class Died(BaseException):
        """The worker process dying mid-send: nothing after the send runs."""

    def die() -> None:
        raise Died

    Slow.during_send = die
    with pytest.raises(Died):
        run_notify_task(first)
    notice = OutboxNotice.objects.get()
    assert (notice.status, Slow.sent) == (NoticeStatus.SENDING, [])
    assert run_notify_task(first) is False  # a redelivered copy, soon after: the claim still stands

    assert notify.do_sweep_notices(now=notice.touched_at + timedelta(seconds=290)) == 0
    assert notify.do_sweep_notices(now=notice.touched_at + timedelta(seconds=310)) == 1
    [_, resent] = enqueued
    # The resent copy runs later than the dead claim went stale.
    assert run_notify_task(resent) is True
    notice.refresh_from_db()
    assert (notice.status, Slow.sent) == (NoticeStatus.SENT, [notice.delivery_id])


@override_settings(GATEHOUSE_NOTIFIERS=[SLOW], NOTIFY_RESEND_AFTER_S=300)
def test_a_try_that_fails_releases_its_claim_so_its_retry_sends_it(
    monkeypatch: pytest.MonkeyPatch, django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks
) -> None:
    _, enqueued = gate_with_lost_notices(monkeypatch, django_capture_on_commit_callbacks)
    notify.do_sweep_notices(now=timezone.now() + timedelta(seconds=310))
    [first] = enqueued

    def fail() -> None:
        raise ConnectionError("receiver down")

    Slow.during_send = fail

    assert run_notify_task(first) is True  # eagerly, the retry runs at once and sends

    notice = OutboxNotice.objects.get()
    assert (notice.status, notice.tries, Slow.sent) == (NoticeStatus.SENT, 2, [notice.delivery_id])
