""" "What will run again" for a fork from a checkpoint on a branch the thread has left.

The list compared the checkpoint with the current head and walked the head's branch for recorded
results. From a checkpoint off that branch it named the wrong effects: none of the refund that
ran right after it on its own branch (which the fork asks again, and runs again if approved),
and the refund the head's branch ran, which a fork from there never replays. It now reads the
branch the checkpoint is on: the head's if it is there, else the newest branch below it.
"""

import json
from typing import Any

import pytest

from agents import runtime
from agents.actions import replay_warnings
from approvals.actions.decisions import check_decision, do_decide
from approvals.actions.threads import do_fork_thread
from approvals.models import ApprovalRequest, ApprovalStatus
from approvals.tests.helpers import steps_sent
from checkpoints.backends import get_backend
from checkpoints.models import Checkpoint, Thread
from tests.factories import make_gate, make_user

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def people(settings: Any, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any]:
    settings.DECISION_UNDO_S = 0
    steps_sent(monkeypatch)  # each step is run here, by hand, up to the model (no model is called)
    return make_user("rita", "reviewer"), make_user("olga", "operator")


def head_of(thread_id: str) -> str:
    return str(Thread.objects.get(pk=thread_id).head_id)


def approve_and_run_the_tool(gate: ApprovalRequest, *, rita: Any) -> str:
    """Approve the gate and run its tools step; return the checkpoint that step wrote."""
    do_decide(gate, reviewer=rita, valid=check_decision(gate, user=rita, decision="approve"))
    outcome = runtime.run_step(thread_id=gate.thread_id, checkpoint_id=head_of(gate.thread_id), worker="w1")
    assert outcome.kind == "stepped"
    return str(outcome.checkpoint_id)


def ran(warnings: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(tool, order) of each; the arguments a gate recorded are a dict, a tool message's JSON."""
    args = [
        w["arguments"] if isinstance(w["arguments"], dict) else json.loads(w["arguments"]) for w in warnings
    ]
    return sorted((w["tool"], a["order_id"]) for w, a in zip(warnings, args, strict=True))


def test_a_fork_from_the_gate_of_a_branch_the_thread_left_lists_the_refund_that_ran_there(
    people: tuple[Any, Any],
) -> None:
    rita, olga = people
    gate = make_gate()  # refund ORD-1001
    approve_and_run_the_tool(gate, rita=rita)
    root = Checkpoint.objects.get(thread_id=gate.thread_id, step=0)
    values = get_backend().get(thread_id=gate.thread_id, checkpoint_id=str(root.pk)).values
    values["messages"][0]["content"] = "Please refund order ORD-1003"
    do_fork_thread(gate.thread_id, user=olga, checkpoint_id=str(root.pk), values=values)

    warnings = replay_warnings(gate.thread_id, checkpoint_id=str(gate.checkpoint_id))

    assert ran(warnings) == [("issue_refund", "ORD-1001")]


def test_a_fork_from_after_the_refund_on_a_branch_the_thread_left_lists_nothing_the_head_ran(
    people: tuple[Any, Any],
) -> None:
    rita, olga = people
    gate = make_gate()  # refund ORD-1001
    after_refund = approve_and_run_the_tool(gate, rita=rita)
    values = get_backend().get(thread_id=gate.thread_id, checkpoint_id=str(gate.checkpoint_id)).values
    call = values["messages"][-1]["tool_calls"][0]
    call["id"] = "call_other"
    call["function"]["arguments"] = json.dumps({"order_id": "ORD-1003", "amount_cents": 1999})
    do_fork_thread(gate.thread_id, user=olga, checkpoint_id=str(gate.checkpoint_id), values=values)
    other = ApprovalRequest.objects.get(thread_id=gate.thread_id, status=ApprovalStatus.PENDING)
    approve_and_run_the_tool(other, rita=rita)  # refund ORD-1003, on the head's branch

    assert ran(replay_warnings(gate.thread_id, checkpoint_id=after_refund)) == []
    # From the gate both branches share: its own refund (asked again) and the head branch's.
    assert ran(replay_warnings(gate.thread_id, checkpoint_id=str(gate.checkpoint_id))) == [
        ("issue_refund", "ORD-1001"),
        ("issue_refund", "ORD-1003"),
    ]
