"""What status an imported thread comes back in: a finished one as it was, an open one paused
or waiting (its decisions are history only)."""

import pytest

from approvals.actions.threads import do_control
from approvals.actions.transfer import check_import, do_import_thread, export_thread
from approvals.models import ApprovalRequest, ApprovalStatus
from checkpoints.models import Thread
from tests.factories import make_gate, make_user

pytestmark = pytest.mark.django_db


def imported(thread_id: str, *, as_id: str) -> Thread:
    document = export_thread(Thread.objects.get(pk=thread_id))
    do_import_thread(check_import(document, thread_id=as_id), user=None)
    return Thread.objects.get(pk=as_id)


def test_a_finished_thread_comes_back_finished_and_an_open_one_waits_with_fresh_approvals() -> None:
    olga = make_user("olga", "operator")
    open_one, finished = make_gate(), make_gate()
    do_control(finished.thread_id, user=olga, verb="cancel")

    assert imported(finished.thread_id, as_id="copy-cancelled").status == "cancelled"
    assert not ApprovalRequest.objects.filter(thread_id="copy-cancelled", status=ApprovalStatus.PENDING)
    assert imported(open_one.thread_id, as_id="copy-waiting").status == "waiting"
    assert (
        ApprovalRequest.objects.filter(thread_id="copy-waiting", status=ApprovalStatus.PENDING).count() == 1
    )
