"""The decision page's edit form for arguments that are not plain text: lists, objects and
Optionals are shown as JSON and read back as JSON, so an unchanged submit approves as proposed."""

import html
import re
from collections.abc import Iterator
from typing import Annotated, Any

import pytest
from django.test import Client
from pydantic import Field

from agents.examples.agents import ConversationState
from agents.prebuilt import ToolAgent
from agents.registry import registry
from agents.tools import Approval, Decision, tool
from approvals.models import ApprovalRequest
from tests.factories import make_gate, make_user

pytestmark = pytest.mark.django_db

AGENT = "tagging-test"
ARGS: dict[str, Any] = {
    "order_id": "ORD-1001",
    "amount_cents": 4250,
    "tags": ["a", "b"],
    "meta": {"source": "chat", "priority": 2},
    "limit": None,
}


@tool(approval=Approval(queue="default", decisions=(Decision.APPROVE, Decision.EDIT, Decision.REJECT)))
def tag_order(
    order_id: str,
    amount_cents: Annotated[int, Field(gt=0)],
    tags: list[str],
    meta: dict[str, Any],
    limit: int | None,
) -> str:
    """Tag an order."""
    return "tagged"


@pytest.fixture
def gate() -> Iterator[ApprovalRequest]:
    registry.register(ToolAgent(name=AGENT, state=ConversationState, tools=[tag_order]))
    try:
        yield make_gate(agent=AGENT, action="tag_order", args=ARGS)
    finally:
        registry.unregister(AGENT)


@pytest.fixture
def rita() -> Client:
    client = Client()
    client.force_login(make_user("rita", "reviewer"))
    return client


def form_values(page: str) -> dict[str, str]:
    """The edit form's `args.*` fields as a browser would submit them, from the rendered page."""
    inputs = re.findall(r'<input type="[^"]*" name="(args\.\w+)" value="([^"]*)"', page)
    textareas = re.findall(r'<textarea name="(args\.\w+)"[^>]*>(.*?)</textarea>', page, re.DOTALL)
    return {name: html.unescape(value) for name, value in [*inputs, *textareas]}


def edit(client: Client, gate: ApprovalRequest, **fields: str) -> Any:
    page = client.get(f"/approvals/{gate.pk}/").content.decode()
    return client.post(f"/approvals/{gate.pk}/", {"decision": "edit", **form_values(page), **fields})


def test_lists_objects_and_a_none_are_shown_as_json_not_python(gate: ApprovalRequest, rita: Client) -> None:
    values = form_values(rita.get(f"/approvals/{gate.pk}/").content.decode())

    assert values == {
        "args.order_id": "ORD-1001",
        "args.amount_cents": "4250",
        "args.tags": '[\n  "a",\n  "b"\n]',
        "args.meta": '{\n  "priority": 2,\n  "source": "chat"\n}',  # as stored (jsonb orders keys)
        "args.limit": "",
    }


def test_an_unchanged_submit_approves_the_arguments_as_proposed(gate: ApprovalRequest, rita: Client) -> None:
    response = edit(rita, gate)

    assert response.status_code == 302, response.content.decode()
    gate.refresh_from_db()
    assert gate.status == "edited"  # an edit that changes nothing is still recorded as the edit
    assert gate.effective_args == ARGS


def test_edited_json_is_validated_by_the_tools_schema(gate: ApprovalRequest, rita: Client) -> None:
    response = edit(rita, gate, **{"args.tags": '["c"]', "args.meta": "{}", "args.limit": "5"})

    assert response.status_code == 302, response.content.decode()
    gate.refresh_from_db()
    assert gate.effective_args == {**ARGS, "tags": ["c"], "meta": {}, "limit": 5}


def test_json_of_the_wrong_shape_is_refused_by_the_schema(gate: ApprovalRequest, rita: Client) -> None:
    response = edit(rita, gate, **{"args.tags": '{"a": 1}'})

    assert response.status_code == 400
    assert ApprovalRequest.objects.get(pk=gate.pk).status == "pending"


@pytest.mark.parametrize("text", ["['a', 'b']", "[1,", "[" * 200 + "]" * 200, "NaN"])
def test_unreadable_json_is_a_field_error_shown_with_the_text_as_typed(
    gate: ApprovalRequest, rita: Client, text: str
) -> None:
    response = edit(rita, gate, **{"args.tags": text})

    assert response.status_code == 400
    page = response.content.decode()
    assert "Tags is not valid JSON" in page
    assert form_values(page)["args.tags"] == text  # shown back as typed, for the reviewer to fix
    assert ApprovalRequest.objects.get(pk=gate.pk).status == "pending"


def test_strings_and_numbers_are_posted_as_before(gate: ApprovalRequest, rita: Client) -> None:
    response = edit(rita, gate, **{"args.order_id": " ORD-1002", "args.amount_cents": "0"})

    assert response.status_code == 400
    assert "Amount cents must be greater than 0" in response.content.decode()
    assert form_values(response.content.decode())["args.order_id"] == " ORD-1002"
