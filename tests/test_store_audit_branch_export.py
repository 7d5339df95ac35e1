"""Exporting a branch the thread has left: the document says the branch's own status.

The export wrote the thread's status beside any branch's head. A finished thread's old branch
ends at a gate (an operator forked from before it); imported, it was `done` at that gate with
its approval request asked afresh: a decision on it ran nothing, and the trace could not go on.
A branch other than the head now exports as left there: paused, or done if it ended, so its
import waits at its gates (asked afresh) or holds until an operator resumes it.
"""

from typing import Any

import pytest
from django.test import Client

from approvals.actions.threads import do_fork_thread
from approvals.actions.tokens import do_create_token
from approvals.models import ApprovalRequest, ApprovalStatus
from checkpoints.backends import get_backend
from checkpoints.models import Checkpoint, Thread, ThreadStatus
from tests.factories import make_gate, make_user

pytestmark = pytest.mark.django_db


@pytest.fixture
def olga() -> Any:
    return make_user("olga", "operator")


def finished_after_a_fork(olga: Any) -> ApprovalRequest:
    """A thread forked from its first checkpoint, away from its gate, that then finished."""
    gate = make_gate()
    first = Checkpoint.objects.get(thread_id=gate.thread_id, step=0)
    do_fork_thread(gate.thread_id, user=olga, checkpoint_id=str(first.pk), values=None)
    get_backend().set_status(thread_id=gate.thread_id, status=ThreadStatus.DONE)
    return gate


def round_trip(olga: Any, thread_id: str, *, branch: str, as_id: str) -> dict[str, Any]:
    api = Client(headers={"Authorization": f"Bearer {do_create_token(user=olga)}"})
    document = api.get(f"/api/threads/{thread_id}/export", {"branch": branch}).json()
    response = api.post(f"/api/imports?thread_id={as_id}", document, content_type="application/json")
    assert response.status_code == 201, response.content
    return {"document": document, "thread": response.json()}


def test_an_old_branch_ending_at_a_gate_imports_waiting_at_it_not_done(olga: Any) -> None:
    gate = finished_after_a_fork(olga)

    done = round_trip(olga, gate.thread_id, branch=str(gate.checkpoint_id), as_id="old-branch")

    assert done["document"]["thread"]["status"] == "paused"
    assert done["thread"]["status"] == "waiting"
    [asked] = ApprovalRequest.objects.filter(thread_id="old-branch", status=ApprovalStatus.PENDING)
    assert asked.action == "issue_refund"


def test_the_head_branch_still_exports_with_the_threads_status(olga: Any) -> None:
    gate = finished_after_a_fork(olga)
    head = str(Thread.objects.get(pk=gate.thread_id).head_id)

    done = round_trip(olga, gate.thread_id, branch=head, as_id="head-branch")

    assert done["document"]["thread"]["status"] == "done"
    assert done["thread"]["status"] == "done"
