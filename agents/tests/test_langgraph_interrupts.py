"""The interrupt shapes a LangGraph graph may ask in, and the resume values each gets back."""

from typing import Any

import pytest

from agents.adapters.langgraph_agent import _asked, _gate_of_call, _resume
from agents.gates import HumanDecision
from agents.tools import Decision

HITL = {
    "action_requests": [
        {"name": "issue_refund", "args": {"order_id": "ORD-1", "amount_cents": 5}, "description": "Refund"},
        {"name": "send_email", "args": {"to": "a@example.com"}},
    ],
    "review_configs": [
        {"action_name": "issue_refund", "allowed_decisions": ["approve", "edit", "reject"]},
        {"action_name": "send_email", "allowed_decisions": ["approve", "reject"]},
    ],
}
INBOX = [
    {
        "action_request": {"action": "issue_refund", "args": {"order_id": "ORD-1"}},
        "config": {"allow_accept": True, "allow_edit": False, "allow_respond": True, "allow_ignore": True},
        "description": "Refund ORD-1",
    }
]


def test_langchains_request_asks_one_action_per_request_with_its_allowed_decisions() -> None:
    refund, email = _asked(HITL)

    assert refund[:3] == ("issue_refund", {"order_id": "ORD-1", "amount_cents": 5}, "Refund")
    assert refund[3] == {Decision.APPROVE, Decision.EDIT, Decision.REJECT}
    assert email[0] == "send_email" and email[3] == {Decision.APPROVE, Decision.REJECT}


def test_langchains_request_is_resumed_with_its_decisions_in_request_order() -> None:
    edited = {"order_id": "ORD-1", "amount_cents": 3}
    decisions = {
        "i1:1": HumanDecision(kind=Decision.REJECT, message="not this one"),
        "i1:0": HumanDecision(kind=Decision.EDIT, args=edited),
    }

    resume = _resume([{"id": "i1", "value": HITL}], decisions)

    assert resume == {
        "i1": {
            "decisions": [
                {"type": "edit", "edited_action": {"name": "issue_refund", "args": edited}},
                {"type": "reject", "message": "Rejected by a human reviewer: not this one"},
            ]
        }
    }


def test_agent_inbox_interrupts_are_resumed_with_its_response_list() -> None:
    [(action, _, description, allowed)] = _asked(INBOX)
    assert (action, description) == ("issue_refund", "Refund ORD-1")
    assert allowed == {Decision.APPROVE, Decision.RESPOND, Decision.REJECT}  # no edit: allow_edit is off

    expired = "Rejected automatically, no reviewer decided in time: too slow"
    for decision, expected in [
        (HumanDecision(kind=Decision.APPROVE), {"type": "accept", "args": None}),
        (HumanDecision(kind=Decision.RESPOND, message="Credit"), {"type": "response", "args": "Credit"}),
        (
            HumanDecision(kind=Decision.REJECT, expired=True, message="too slow"),
            {"type": "response", "args": expired},
        ),
    ]:
        assert _resume([{"id": "i2", "value": INBOX}], {"i2:0": decision}) == {"i2": [expected]}


def call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def test_each_call_an_interrupt_asks_about_is_found_by_its_action_and_arguments() -> None:
    asked = {
        "action_requests": [
            {"name": "issue_refund", "args": {"order_id": "ORD-1", "amount_cents": 5}},
            {"name": "issue_refund", "args": {"order_id": "ORD-1", "amount_cents": 5}},
        ]
    }
    messages: list[dict[str, Any]] = [
        {
            "role": "assistant",
            "tool_calls": [call("old", "issue_refund", '{"order_id": "ORD-1", "amount_cents": 5}')],
        },
        {"role": "tool", "content": "done"},
        {
            "role": "assistant",
            "tool_calls": [
                call("look", "lookup_order", '{"order_id": "ORD-1"}'),
                call("a", "issue_refund", '{"amount_cents": 5, "order_id": "ORD-1"}'),  # key order aside
                call("b", "issue_refund", '{"order_id": "ORD-1", "amount_cents": 5}'),
            ],
        },
    ]

    # The same call twice: each gate claims its own, in order; the ungated and earlier calls none.
    assert _gate_of_call([{"id": "i1", "value": asked}], messages) == {"a": "i1:0", "b": "i1:1"}
    assert _gate_of_call([{"id": "i1", "value": INBOX}], messages) == {}  # other arguments: no call


def test_any_other_interrupt_is_refused_with_what_it_was() -> None:
    with pytest.raises(ValueError, match="human-in-the-loop request or Agent Inbox"):
        _asked("Approve the refund?")
