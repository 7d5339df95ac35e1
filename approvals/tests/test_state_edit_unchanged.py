"""An operator's state edit that changes nothing writes nothing: no checkpoint, no approval asked
again, no ledger event; the page and the API say so. An agent whose state is not edited here
gets a read-only state page and no Edit state button."""

import copy
from collections.abc import Iterator

import pytest
from django.test import Client

from agents.registry import registry
from approvals.actions.threads import do_control, do_edit_state
from approvals.actions.tokens import do_create_token
from approvals.models import ApprovalRequest, ApprovalStatus, AuditEvent
from approvals.thread_selectors import pretty
from checkpoints.backends import get_backend
from checkpoints.models import Checkpoint, Thread
from tests.factories import make_gate, make_user

pytestmark = pytest.mark.django_db

READ_ONLY = "refunds_read_only"


def nothing_written(request_: ApprovalRequest, *, checkpoints: int) -> bool:
    request_.refresh_from_db()
    thread = Thread.objects.get(pk=request_.thread_id)
    return (
        Checkpoint.objects.filter(thread_id=request_.thread_id).count() == checkpoints
        and str(thread.head_id) == str(request_.checkpoint_id)
        and request_.status == ApprovalStatus.PENDING
        and ApprovalRequest.objects.filter(thread_id=request_.thread_id).count() == 1
        and not AuditEvent.objects.filter(action="thread.update").exists()
    )


def operator_page() -> Client:
    page = Client()
    page.force_login(make_user("olga", "operator"))
    return page


def test_saving_the_editor_unchanged_writes_nothing_and_says_nothing_changed() -> None:
    request_ = make_gate()
    checkpoints = Checkpoint.objects.filter(thread_id=request_.thread_id).count()
    page = operator_page()
    url = f"/threads/{request_.thread_id}/state/"
    shown = page.get(url).context["text"]

    saved = page.post(url, {"values": shown}, follow=True)

    assert saved.status_code == 200
    [said] = [str(m) for m in saved.context["messages"]]
    assert said.startswith("Nothing changed. ")
    assert "Nothing changed." in saved.content.decode()
    assert nothing_written(request_, checkpoints=checkpoints)


def test_an_unchanged_edit_of_a_paused_thread_writes_nothing_and_keeps_it_paused() -> None:
    olga = make_user("olga", "operator")
    request_ = make_gate()
    do_control(request_.thread_id, user=olga, verb="pause")
    checkpoints = Checkpoint.objects.filter(thread_id=request_.thread_id).count()
    values = get_backend().get(thread_id=request_.thread_id).values
    from agents.actions.control import NothingChanged  # here: the other tests run on code without it

    with pytest.raises(NothingChanged):
        do_edit_state(request_.thread_id, user=olga, values=values)

    assert nothing_written(request_, checkpoints=checkpoints)
    assert Thread.objects.get(pk=request_.thread_id).status == "paused"


def test_an_unchanged_edit_over_the_api_is_a_409_that_writes_nothing() -> None:
    olga = make_user("olga", "operator")
    request_ = make_gate()
    checkpoints = Checkpoint.objects.filter(thread_id=request_.thread_id).count()
    api = Client(headers={"Authorization": f"Bearer {do_create_token(user=olga)}"})
    url = f"/api/threads/{request_.thread_id}/state"
    head = get_backend().get(thread_id=request_.thread_id).values

    for values in ({}, {"messages": head["messages"]}):
        response = api.patch(url, {"values": values}, content_type="application/json")
        assert response.status_code == 409, response.content
        assert response.json()["detail"].startswith("Nothing changed")

    assert nothing_written(request_, checkpoints=checkpoints)


@pytest.fixture
def read_only_agent() -> Iterator[str]:
    """The refunds agent under another name, declaring its state not edited here (as an adapter
    whose framework keeps the state does)."""
    agent = copy.copy(registry.get("refunds"))
    agent.name = READ_ONLY
    agent.state_editable = False
    registry.register(agent)
    yield READ_ONLY
    registry.unregister(READ_ONLY)


def test_an_agent_whose_state_is_not_edited_here_gets_a_read_only_page_and_no_edit_button(
    read_only_agent: str,
) -> None:
    request_ = make_gate(agent=read_only_agent)
    page = operator_page()
    url = f"/threads/{request_.thread_id}/state/"

    thread_page = page.get(f"/threads/{request_.thread_id}/").content.decode()
    state_page = page.get(url).content.decode()

    assert url not in thread_page and "Edit state" not in thread_page
    assert "data-read-only" in state_page and "cannot edit the state" in state_page
    assert "<textarea" not in state_page and "Save as a new checkpoint" not in state_page
    assert "ORD-1001" in state_page  # the state itself, to read


def test_an_agent_whose_state_is_not_edited_here_refuses_every_write(read_only_agent: str) -> None:
    request_ = make_gate(agent=read_only_agent)
    checkpoints = Checkpoint.objects.filter(thread_id=request_.thread_id).count()
    page = operator_page()
    url = f"/threads/{request_.thread_id}/state/"
    values = get_backend().get(thread_id=request_.thread_id).values

    unchanged = page.post(url, {"values": pretty(values)}, follow=True)
    values["messages"][-1]["content"] = "Refunding the order now."
    changed = page.post(url, {"values": pretty(values)})

    assert "Nothing changed." in unchanged.content.decode()
    assert changed.status_code == 400 and "is not edited here" in changed.content.decode()
    assert nothing_written(request_, checkpoints=checkpoints)


def test_a_native_agents_thread_still_offers_its_editor() -> None:
    request_ = make_gate()
    page = operator_page()

    thread_page = page.get(f"/threads/{request_.thread_id}/").content.decode()
    state_page = page.get(f"/threads/{request_.thread_id}/state/").content.decode()

    assert f"/threads/{request_.thread_id}/state/" in thread_page
    assert "<textarea" in state_page and "data-read-only" not in state_page
