"""A state a person writes (an edit, a fork, an import) whose messages the model cannot read --
content that is neither text nor a list of content parts, a role the chat API does not have --
is a 400 naming the field that changes nothing, not a thread that fails at its next step with
the model API's 400. Over the HTTP API (Django's test client)."""

import json
from typing import Any

import pytest
from django.test import Client

from approvals.actions.tokens import do_create_token
from approvals.models import ApprovalRequest, AuditEvent
from checkpoints.models import Checkpoint, Thread
from tests.factories import make_gate, make_user

pytestmark = pytest.mark.django_db

BAD = [
    ({"role": "user", "content": {"x": 1}}, "content", "must be text, a list of content parts"),
    ({"role": "user", "content": 5}, "content", "must be text, a list of content parts"),
    ({"role": "zzz", "content": "hi"}, "role", "must be one of: system, developer, user, assistant, tool"),
]
IDS = ["object-content", "number-content", "unknown-role"]


def operator() -> Client:
    return Client(headers={"Authorization": f"Bearer {do_create_token(user=make_user('olga', 'operator'))}"})


def send(client: Client, method: str, path: str, body: Any) -> Any:
    return getattr(client, method)(path, json.dumps(body), content_type="application/json")


def everything() -> list[Any]:
    return [
        list(Thread.objects.order_by("pk").values_list("pk", "status", "head_id")),
        list(ApprovalRequest.objects.order_by("pk").values_list("pk", "status")),
        Checkpoint.objects.count(),
        AuditEvent.objects.count(),
    ]


def with_bad_message(messages: list[dict[str, Any]], bad: dict[str, Any]) -> list[dict[str, Any]]:
    return [*messages, {"id": "msg_bad", **bad}]


@pytest.mark.parametrize(("bad", "field", "says"), BAD, ids=IDS)
def test_a_state_edit_with_a_message_the_model_cannot_read_is_a_400_naming_it(
    bad: dict[str, Any], field: str, says: str
) -> None:
    gate = make_gate()
    client = operator()
    values = client.get(f"/api/threads/{gate.thread_id}").json()["values"]
    before = everything()

    response = send(
        client,
        "patch",
        f"/api/threads/{gate.thread_id}/state",
        {"values": {"messages": with_bad_message(values["messages"], bad)}},
    )

    assert response.status_code == 400, response.content
    index = len(values["messages"])
    assert says in response.json()["errors"][f"messages.{index}.{field}"]
    assert everything() == before


@pytest.mark.parametrize(("bad", "field", "says"), BAD, ids=IDS)
def test_a_fork_with_a_message_the_model_cannot_read_is_a_400_naming_it(
    bad: dict[str, Any], field: str, says: str
) -> None:
    gate = make_gate()
    client = operator()
    values = client.get(f"/api/threads/{gate.thread_id}").json()["values"]
    before = everything()

    response = send(
        client,
        "post",
        f"/api/threads/{gate.thread_id}/fork",
        {
            "checkpoint_id": str(gate.checkpoint_id),
            "values": {**values, "messages": with_bad_message(values["messages"], bad)},
        },
    )

    assert response.status_code == 400, response.content
    assert says in json.dumps(response.json())
    assert everything() == before


@pytest.mark.parametrize(("bad", "field", "says"), BAD, ids=IDS)
def test_an_import_with_a_message_the_model_cannot_read_is_a_400_naming_it(
    bad: dict[str, Any], field: str, says: str
) -> None:
    gate = make_gate()
    client = operator()
    document = client.get(f"/api/threads/{gate.thread_id}/export").json()
    for checkpoint in document["checkpoints"]:
        values = checkpoint["values"]
        values["messages"] = with_bad_message(values.get("messages", []), bad)
    before = everything()

    response = send(client, "post", "/api/imports?thread_id=imported-1", document)

    assert response.status_code == 400, response.content
    assert says in response.json()["detail"] and f".{field}" in response.json()["detail"]
    assert everything() == before


def test_text_content_parts_and_no_content_are_still_accepted() -> None:
    gate = make_gate()
    client = operator()
    values = client.get(f"/api/threads/{gate.thread_id}").json()["values"]
    first = {**values["messages"][0], "content": [{"type": "text", "text": "Please refund order ORD-1001"}]}

    response = send(
        client,
        "patch",
        f"/api/threads/{gate.thread_id}/state",
        {"values": {"messages": [first, *values["messages"][1:]]}},
    )

    assert response.status_code == 200, response.content
