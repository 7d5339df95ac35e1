"""An operator's controls on a thread that failed or finished: nothing answers 500, and a failed
thread's open approvals can be withdrawn.

Resume and continue read the head (resume to know whether to wait at its gates, continue to add
the message to it); a head that fails its digest check raised out of the page as a 500. The page
now says what is wrong and how to go on (fork from the last good checkpoint), changing nothing.
A failed thread stopped at a gate keeps its approval requests open in the inbox, where deciding
them runs nothing until an operator resumes it; cancel refused it ("it must be running, waiting,
paused"), so nobody could withdraw them. Cancel now takes a failed thread too.
"""

from typing import Any

import pytest
from django.test import Client

from approvals.actions.tokens import do_create_token
from approvals.models import ApprovalRequest, ApprovalStatus, AuditEvent
from checkpoints.backends import get_backend
from checkpoints.models import Checkpoint, Thread, ThreadStatus
from tests.factories import make_gate, make_user

pytestmark = pytest.mark.django_db


@pytest.fixture
def olga() -> Any:
    return make_user("olga", "operator")


def web(user: Any) -> Client:
    client = Client(raise_request_exception=False)
    client.force_login(user)
    return client


def corrupt_head(status: ThreadStatus) -> ApprovalRequest:
    gate = make_gate()
    get_backend().set_status(thread_id=gate.thread_id, status=status)
    Checkpoint.objects.filter(pk=gate.checkpoint_id).update(refs={"tampered": ["i", True]})
    return gate


def said(response: Any) -> list[str]:
    return [str(m) for m in response.context["messages"]]


def test_resuming_a_failed_thread_whose_head_is_corrupt_says_so_and_changes_nothing(olga: Any) -> None:
    gate = corrupt_head(ThreadStatus.FAILED)

    response = web(olga).post(f"/threads/{gate.thread_id}/control/resume/", follow=True)

    assert response.status_code == 200
    [message] = said(response)
    assert "failed its SHA-256 digest check" in message
    assert "Fork from the last good checkpoint" in message
    assert Thread.objects.get(pk=gate.thread_id).status == ThreadStatus.FAILED
    assert not AuditEvent.objects.filter(action="thread.resume").exists()


def test_continuing_a_finished_thread_whose_head_is_corrupt_says_so_and_changes_nothing(olga: Any) -> None:
    gate = corrupt_head(ThreadStatus.DONE)
    before = Checkpoint.objects.filter(thread_id=gate.thread_id).count()

    response = web(olga).post(f"/threads/{gate.thread_id}/messages/", {"input": "And one more"}, follow=True)

    assert response.status_code == 200
    [message] = said(response)
    assert "failed its SHA-256 digest check" in message
    assert Thread.objects.get(pk=gate.thread_id).status == ThreadStatus.DONE
    assert Checkpoint.objects.filter(thread_id=gate.thread_id).count() == before


def test_cancelling_a_failed_thread_at_a_gate_withdraws_its_open_approval(olga: Any) -> None:
    gate = make_gate()
    get_backend().set_status(thread_id=gate.thread_id, status=ThreadStatus.FAILED)
    api = Client(headers={"Authorization": f"Bearer {do_create_token(user=olga)}"})
    page = web(olga).get(f"/threads/{gate.thread_id}/").content.decode()
    assert f"/threads/{gate.thread_id}/control/cancel/" in page  # the thread page offers it too

    response = api.post(f"/api/threads/{gate.thread_id}/cancel")

    assert response.status_code == 200, response.content
    assert response.json()["status"] == "cancelled"
    gate.refresh_from_db()
    assert gate.status == ApprovalStatus.SUPERSEDED
    assert gate.status_reason == "the thread was cancelled by olga"
    assert web(olga).post(f"/threads/{gate.thread_id}/control/resume/").status_code == 302
    assert Thread.objects.get(pk=gate.thread_id).status == ThreadStatus.CANCELLED  # for good
