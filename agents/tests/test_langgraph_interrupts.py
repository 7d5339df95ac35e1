"""The interrupt shapes a LangGraph graph may ask in, and the resume values each gets back."""

import pytest

from agents.adapters.langgraph_agent import _asked, _resume
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


def test_any_other_interrupt_is_refused_with_what_it_was() -> None:
    with pytest.raises(ValueError, match="human-in-the-loop request or Agent Inbox"):
        _asked("Approve the refund?")
