"""A thread whose head fails its integrity check (a tampered or missing row): its pages still
answer and say so, and an operator forks from the last good checkpoint to go on ("continue from
the last good step"), instead of every page of the thread answering 500."""

from typing import Any

import pytest
from django.test import Client

from approvals.actions.tokens import do_create_token
from approvals.models import ApprovalRequest
from checkpoints.models import Checkpoint, StoredValue, Thread, ThreadStatus
from tests.factories import make_gate, make_user

pytestmark = pytest.mark.django_db


@pytest.fixture
def olga() -> Any:
    return make_user("olga", "operator", "reviewer")


@pytest.fixture(params=["tampered", "missing a row"])
def corrupt(request: pytest.FixtureRequest) -> ApprovalRequest:
    gate = make_gate()
    if request.param == "tampered":
        Checkpoint.objects.filter(pk=gate.checkpoint_id).update(refs={"tampered": ["i", True]})
    else:  # the gate's assistant message: the last list item, which only the head holds
        last = StoredValue.objects.filter(thread_id=gate.thread_id).order_by("-depth").first()
        assert last is not None
        StoredValue.objects.filter(thread_id=gate.thread_id, key=last.key).delete()
    return gate


def test_its_pages_say_the_head_cannot_be_shown_and_a_fork_from_a_good_checkpoint_goes_on(
    corrupt: ApprovalRequest, olga: Any
) -> None:
    web = Client()
    web.force_login(olga)
    thread_id = corrupt.thread_id
    first = Checkpoint.objects.get(thread_id=thread_id, step=0)

    page = web.get(f"/threads/{thread_id}/")
    assert page.status_code == 200
    assert "The current checkpoint cannot be shown" in page.content.decode()
    assert "failed its SHA-256 digest check" in page.content.decode()
    assert web.get(f"/approvals/{corrupt.pk}/").status_code == 200
    edit = web.get(f"/threads/{thread_id}/state/", follow=True)
    assert "The state cannot be edited" in edit.content.decode()
    assert web.get(f"/threads/{thread_id}/checkpoints/{first.pk}/").status_code == 200  # the fork dialog

    fork = web.post(f"/threads/{thread_id}/checkpoints/{first.pk}/", {"confirm": "1"})

    assert fork.status_code == 302
    thread = Thread.objects.get(pk=thread_id)
    assert thread.status == ThreadStatus.RUNNING
    assert thread.head is not None and thread.head.parent_id == first.pk
    assert web.get(f"/threads/{thread_id}/").content.decode().count("cannot be shown") == 0


def test_the_api_answers_409_naming_the_checkpoint(corrupt: ApprovalRequest, olga: Any) -> None:
    api = Client(headers={"Authorization": f"Bearer {do_create_token(user=olga)}"})

    response = api.get(f"/api/threads/{corrupt.thread_id}")

    assert response.status_code == 409
    assert f"Checkpoint {corrupt.checkpoint_id} of thread" in response.json()["detail"]
