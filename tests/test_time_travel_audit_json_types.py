"""An edit that changes only a value's JSON type (1 to true, 1 to 1.0) is an edit.

The state editor compared the edited state with the head's by Python equality, where 1 == True
== 1.0: saving such a change said "Nothing changed." and wrote nothing (a 409 over the API), and
the fork dialog took the edited state for the origin's, forked "as it was" and dropped the edit,
though its preview listed the change. They now compare the states as JSON.
"""

import json
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import Client

from agents.examples.agents import ConversationState, issue_refund
from agents.prebuilt import ToolAgent
from agents.registry import registry
from approvals.actions.threads import do_edit_state
from approvals.actions.tokens import do_create_token
from approvals.models import ApprovalRequest
from checkpoints.backends import get_backend
from checkpoints.models import Checkpoint, Thread
from tests.factories import make_gate, make_user

pytestmark = pytest.mark.django_db

AGENT = "refunds-with-settings"


class SettingsState(ConversationState):
    settings: dict[str, Any] = {}


@pytest.fixture
def olga() -> Any:
    return make_user("olga", "operator")


@pytest.fixture
def gate(olga: Any) -> Iterator[ApprovalRequest]:
    """A thread waiting at a gate whose state holds {"limit": 1} in a free-form field."""
    registry.register(ToolAgent(name=AGENT, state=SettingsState, tools=[issue_refund]))
    try:
        request_ = make_gate(agent=AGENT)
        values = get_backend().get(thread_id=request_.thread_id).values
        do_edit_state(request_.thread_id, user=olga, values={**values, "settings": {"limit": 1}})
        yield request_
    finally:
        registry.unregister(AGENT)


def head_values(thread_id: str) -> dict[str, Any]:
    return get_backend().get(thread_id=thread_id).values


@pytest.mark.parametrize("value", [True, 1.0])
def test_an_edit_that_changes_only_a_values_type_is_saved(
    gate: ApprovalRequest, olga: Any, value: Any
) -> None:
    api = Client(headers={"Authorization": f"Bearer {do_create_token(user=olga)}"})

    response = api.patch(
        f"/api/threads/{gate.thread_id}/state",
        {"values": {"settings": {"limit": value}}},
        content_type="application/json",
    )

    assert response.status_code == 200, response.content
    assert repr(head_values(gate.thread_id)["settings"]["limit"]) == repr(value)


def test_a_fork_whose_edit_changes_only_a_values_type_starts_from_the_edit(
    gate: ApprovalRequest, olga: Any
) -> None:
    web = Client()
    web.force_login(olga)
    thread_id = gate.thread_id
    origin = str(Thread.objects.get(pk=thread_id).head_id)
    text = get_backend().get(thread_id=thread_id).values | {"settings": {"limit": True}}
    response = web.post(
        f"/threads/{thread_id}/checkpoints/{origin}/", {"values": json.dumps(text), "confirm": "1"}
    )

    assert response.status_code == 302
    head = Thread.objects.get(pk=thread_id).head
    assert head is not None and str(head.parent_id) == origin
    assert head_values(thread_id)["settings"]["limit"] is True
    assert Checkpoint.objects.filter(thread_id=thread_id).count() == 4  # input, gate, update, fork
