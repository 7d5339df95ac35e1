"""Which gate a LangGraph interrupt raised anew after an edit asks again (its new interrupt has a
new id, so a new gate key): the gate of the same tool call; where an interrupt's action matches
no call (a custom interrupt), the same action in the same place."""

from agents.adapters.langgraph_agent import _asking_again
from agents.graph import Gate
from agents.tools import Approval


def gates(*keys: str) -> list[Gate]:
    return [Gate(key=k, action="issue_refund", args={}, approval=Approval()) for k in keys]


def test_the_same_call_is_the_same_gate_whatever_its_place() -> None:
    before = [("old:0", "issue_refund", "call_a"), ("old:1", "issue_refund", "call_b")]
    now = [("new:0", "issue_refund", "call_b"), ("new:1", "issue_refund", "call_c")]

    again = _asking_again(gates("new:0", "new:1"), before=before, now=now)

    assert [g.asks_again for g in again] == ["old:1", ""]  # call_c is a call no one was asked about


def test_an_action_that_matches_no_call_is_matched_by_its_place_among_its_actions() -> None:
    before = [("old:0", "issue_refund", None), ("old:1", "send_email", None), ("old:2", "issue_refund", None)]
    now = [("new:0", "send_email", None), ("new:1", "issue_refund", None), ("new:2", "issue_refund", None)]
    asked = [Gate(key=k, action=a, args={}, approval=Approval()) for k, a, _ in now]

    again = _asking_again(asked, before=before, now=now)

    assert [g.asks_again for g in again] == ["old:1", "old:0", "old:2"]
    assert _asking_again(gates("x:0"), before=[], now=[("x:0", "issue_refund", None)])[0].asks_again == ""
