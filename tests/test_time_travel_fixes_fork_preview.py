"""The fork dialog's preview refuses what its confirm refuses, in the same words.

A fork of edited values runs the agent's edit_errors (an adapter whose framework keeps the
state refuses edits of the fields that say where it stands); the preview ran only the schema's
check, so it showed the diff and a confirm button, and the confirm then answered 400. The
preview now runs the fork's own checks (control.check_fork).
"""

import json
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import Client

from agents.examples.agents import ConversationState, issue_refund
from agents.prebuilt import ToolAgent
from agents.registry import registry
from approvals.models import ApprovalRequest
from checkpoints.backends import get_backend
from checkpoints.models import Checkpoint, Thread
from tests.factories import make_gate, make_user

pytestmark = pytest.mark.django_db

AGENT = "refunds-with-a-cursor"
REFUSAL = "says where the framework stands: only messages can be edited"


class CursorState(ConversationState):
    cursor: str = "c-1"


class CursorAgent(ToolAgent):
    """Refuses an edit of `cursor`, as the LangGraph adapter refuses one of its checkpoint."""

    def edit_errors(self, *, before: dict[str, Any], after: dict[str, Any]) -> dict[str, str]:
        return {"cursor": REFUSAL} if after.get("cursor") != before.get("cursor", "c-1") else {}


@pytest.fixture
def gate() -> Iterator[ApprovalRequest]:
    registry.register(CursorAgent(name=AGENT, state=CursorState, tools=[issue_refund]))
    try:
        yield make_gate(agent=AGENT)
    finally:
        registry.unregister(AGENT)


@pytest.fixture
def web() -> Client:
    client = Client()
    client.force_login(make_user("olga", "operator"))
    return client


def post(web: Client, gate: ApprovalRequest, values: dict[str, Any], **form: str) -> Any:
    origin = str(Thread.objects.get(pk=gate.thread_id).head_id)
    return web.post(
        f"/threads/{gate.thread_id}/checkpoints/{origin}/", {"values": json.dumps(values), **form}
    )


def test_a_preview_refuses_an_edit_the_agent_refuses_as_the_confirm_does(
    web: Client, gate: ApprovalRequest
) -> None:
    edited = get_backend().get(thread_id=gate.thread_id).values | {"cursor": "c-9"}
    written = Checkpoint.objects.filter(thread_id=gate.thread_id).count()

    preview = post(web, gate, edited)
    confirm = post(web, gate, edited, confirm="1")

    assert confirm.status_code == 400
    assert confirm.context["errors"] == {"cursor": REFUSAL}
    assert preview.status_code == 400
    assert preview.context["errors"] == confirm.context["errors"]
    assert "preview" not in preview.context  # no diff to confirm
    assert REFUSAL in preview.content.decode()
    assert Checkpoint.objects.filter(thread_id=gate.thread_id).count() == written


def test_a_preview_of_an_edit_the_agent_takes_shows_the_diff(web: Client, gate: ApprovalRequest) -> None:
    values = get_backend().get(thread_id=gate.thread_id).values
    edited = values | {"messages": [*values["messages"][:-1], {**values["messages"][-1], "content": "Hm."}]}

    preview = post(web, gate, edited)

    assert preview.status_code == 200
    assert preview.context["preview"]["edited"] is True
    assert [c.path for c in preview.context["preview"]["changes"]] == [
        f"messages[{len(values['messages']) - 1}].content"
    ]
