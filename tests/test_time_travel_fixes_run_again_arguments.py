"""Each entry of "What will run again" gives its arguments as an object.

replay_warnings lists the effects an agent finds in the state (a tool message and its call)
and those runtime.run_once recorded at a gate. The first gave `arguments` as the JSON text
OpenAI's format keeps, the second as the gate's dict: a caller reading
`w["arguments"]["order_id"]` failed on one of them. Both are objects now.
"""

from typing import Any

import pytest
from django.test import Client

from agents import runtime
from agents.actions import replay_warnings
from agents.actions.control import _with_object_arguments
from approvals.actions.decisions import check_decision, do_decide
from approvals.tests.helpers import steps_sent
from checkpoints.models import Thread
from tests.factories import make_gate, make_user

pytestmark = pytest.mark.django_db(transaction=True)


def test_an_effect_found_in_the_state_gives_its_arguments_as_the_gate_does(
    settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.DECISION_UNDO_S = 0
    steps_sent(monkeypatch)  # each step is run here, by hand
    rita, olga = make_user("rita", "reviewer"), make_user("olga", "operator")
    gate = make_gate()  # refund ORD-1001
    do_decide(gate, reviewer=rita, valid=check_decision(gate, user=rita, decision="approve"))
    head = str(Thread.objects.get(pk=gate.thread_id).head_id)
    outcome = runtime.run_step(thread_id=gate.thread_id, checkpoint_id=head, worker="w1")
    assert outcome.kind == "stepped"  # its tool message is in the state

    [warning] = replay_warnings(gate.thread_id, checkpoint_id=str(gate.checkpoint_id))

    assert warning["tool"] == "issue_refund"
    assert warning["arguments"] == gate.args
    web = Client()
    web.force_login(olga)
    page = web.get(f"/threads/{gate.thread_id}/checkpoints/{gate.checkpoint_id}/").content.decode()
    assert "What will run again" in page and "ORD-1001" in page


@pytest.mark.parametrize(
    "arguments,expected",
    [
        ('{"order_id": "ORD-1"}', {"order_id": "ORD-1"}),
        ({"order_id": "ORD-1"}, {"order_id": "ORD-1"}),
        ("", {}),
        ("not json", {"__raw__": "not json"}),
        ("[1, 2]", {"__raw__": [1, 2]}),
    ],
)
def test_arguments_that_are_not_an_object_are_kept_as_a_gate_keeps_them(
    arguments: Any, expected: dict[str, Any]
) -> None:
    effect = {"key": "call_1", "tool": "issue_refund", "arguments": arguments, "result": "ok"}

    assert _with_object_arguments(effect) == {**effect, "arguments": expected}
