"""The inbox as the record of what was asked: each row quotes the user message that led to its
gate (a later turn of the thread, on the gate's own branch), in a fixed number of queries; a
paused thread's row says so; refused filters read as sentences."""

import json
import uuid

import pytest
from django.db import connection, transaction
from django.test import Client
from django.test.utils import CaptureQueriesContext

from agents import gates
from agents.registry import registry
from approvals.models import ApprovalRequest
from checkpoints.backends import get_backend
from checkpoints.backends.base import NewCheckpoint
from checkpoints.models import CheckpointSource, Thread, ThreadStatus
from tests.factories import make_gate, make_user

pytestmark = pytest.mark.django_db


def reviewer() -> Client:
    client = Client()
    client.force_login(make_user("rita", "reviewer"))
    return client


def gate_in_a_later_turn(
    earlier: ApprovalRequest, *, said: str, args: dict[str, object], parent_id: str = ""
) -> ApprovalRequest:
    """The thread goes on past `earlier`'s gate (from `parent_id`, a fork, if given): the call's
    result, the model's answer, the person's next message `said`, and a call asking about `args`."""
    definition = registry.get(earlier.agent)
    backend = get_backend()
    parent = backend.get(thread_id=earlier.thread_id, checkpoint_id=parent_id or str(earlier.checkpoint_id))
    call = {
        "id": f"call_{uuid.uuid4().hex[:8]}",
        "type": "function",
        "function": {"name": "issue_refund", "arguments": json.dumps(args)},
    }
    messages = [
        *parent.values["messages"],
        {"role": "tool", "tool_call_id": earlier.key, "content": '{"refunded": true}'},
        {"role": "assistant", "content": "Done: refunded."},
        {"role": "user", "content": said},
        {"role": "assistant", "content": None, "tool_calls": [call]},
    ]
    values = {**parent.values, "messages": messages}
    opened = definition.pending_gates(definition.state.model_validate(values), "tools")
    head = Thread.objects.get(pk=earlier.thread_id).head_id
    with transaction.atomic():
        gate = backend.put(
            thread_id=earlier.thread_id,
            parent_id=parent.id,
            expected_head=str(head),
            status=ThreadStatus.WAITING,
            checkpoint=NewCheckpoint(
                values=values,
                source=CheckpointSource.FORK if parent_id else CheckpointSource.STEP,
                next=["tools"],
                node="model",
                metadata=gates.gate_metadata(opened),
            ),
        )
        gates.open_gates(thread_id=earlier.thread_id, agent=earlier.agent, checkpoint=gate, gates=opened)
    return ApprovalRequest.objects.get(checkpoint_id=gate.id)


def row(html: str, request_: ApprovalRequest) -> str:
    start = html.index(f'id="approval-{request_.pk}"')
    return html[start : html.index("</div>", start)]


def test_a_row_quotes_the_message_that_led_to_its_gate_not_the_threads_first() -> None:
    first = make_gate(
        args={"order_id": "ORD-1003", "amount_cents": 1999}, user_input="Please refund order ORD-1003"
    )
    later = gate_in_a_later_turn(
        first,
        said="Thanks! Also refund order ORD-1001 please",
        args={"order_id": "ORD-1001", "amount_cents": 4250},
    )

    html = reviewer().get("/").content.decode()

    assert "“Thanks! Also refund order ORD-1001 please”" in row(html, later)
    assert "ORD-1003" not in row(html, later)
    assert "“Please refund order ORD-1003”" in row(html, first)


def test_a_row_quotes_the_message_on_its_own_branch() -> None:
    first = make_gate(args={"order_id": "ORD-1003", "amount_cents": 1999})
    main = gate_in_a_later_turn(
        first, said="Also refund ORD-1001", args={"order_id": "ORD-1001", "amount_cents": 4250}
    )
    forked = gate_in_a_later_turn(
        first,
        said="Actually, refund ORD-1002 instead",
        args={"order_id": "ORD-1002", "amount_cents": 12999},
        parent_id=str(first.checkpoint_id),
    )

    html = reviewer().get("/").content.decode()

    assert "“Actually, refund ORD-1002 instead”" in row(html, forked)
    assert "“Also refund ORD-1001”" in row(html, main)


def test_the_inbox_reads_the_quoted_messages_in_the_same_queries_for_one_row_or_many() -> None:
    client = reviewer()
    make_gate()
    client.get("/")  # sessions, caches and the like settle
    with CaptureQueriesContext(connection) as one:
        client.get("/")
    for n in range(6):
        earlier = make_gate(user_input=f"Refund ORD-100{n}")
        gate_in_a_later_turn(
            earlier, said=f"And ORD-200{n}", args={"order_id": "ORD-1001", "amount_cents": 10}
        )

    with CaptureQueriesContext(connection) as many:
        html = client.get("/").content.decode()

    assert "And ORD-2005" in html
    assert len(many.captured_queries) == len(one.captured_queries)


def test_a_row_of_a_paused_thread_says_the_thread_is_paused() -> None:
    paused, running = make_gate(), make_gate()
    Thread.objects.filter(pk=paused.thread_id).update(status=ThreadStatus.PAUSED)

    html = reviewer().get("/").content.decode()

    assert "thread paused" in row(html, paused)
    assert "thread paused" not in row(html, running)


def test_refused_filters_read_as_clean_sentences() -> None:
    rita = reviewer()
    response = rita.get("/", {"agent": "nope", "age": "9"})
    other = rita.get("/", {"queue": "nobody-here"})

    html = response.content.decode()
    start = html.index("Those filters are not valid")
    message = html[start : html.index("</div>", start)]
    assert response.status_code == 400
    assert message == (
        "Those filters are not valid. Agent: no agent is registered as “nope”. "
        "Age: “9” is not one of the ages the list offers. Showing everything instead."
    )
    assert "Queue: there is no queue “nobody-here” that you can see." in other.content.decode()
