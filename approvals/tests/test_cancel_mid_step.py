"""An operator's cancel while a step is in flight stops it: a gated tool that had not run yet
never runs, and a step that then fails leaves the thread cancelled (not failed, which an
operator could resume, running the approved refund on a cancelled thread)."""

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.db import connection

from agents import runtime
from agents.examples.models import Refund
from agents.registry import registry
from approvals.actions.decisions import check_decision, do_decide
from approvals.actions.threads import do_control
from approvals.tests.helpers import steps_sent
from checkpoints.models import Thread, ThreadStatus
from tests.factories import make_gate, make_user

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def approved(settings: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, str]]:
    """A refunds thread whose refund rita approved: (thread id, the head its step runs from)."""
    settings.DECISION_UNDO_S = 0
    steps_sent(monkeypatch)
    rita = make_user("rita", "reviewer")
    request_ = make_gate()
    do_decide(request_, reviewer=rita, valid=check_decision(request_, user=rita, decision="approve"))
    yield request_.thread_id, str(Thread.objects.get(pk=request_.thread_id).head_id)


def step_held_while(
    monkeypatch: pytest.MonkeyPatch,
    *,
    thread_id: str,
    head: str,
    tools: Callable[..., Any],
    meanwhile: Callable[[], Any],
) -> runtime.StepOutcome:
    """Run the thread's step in a worker thread; its tools node waits inside until `meanwhile` ran."""
    agent = registry.get("refunds")
    inside, go, out = threading.Event(), threading.Event(), {}

    def held(state: Any, ctx: Any) -> Any:
        inside.set()
        assert go.wait(20)
        return tools(state, ctx)

    monkeypatch.setitem(agent.nodes, "tools", held)

    def step() -> None:
        try:
            out["outcome"] = runtime.run_step(thread_id=thread_id, checkpoint_id=head, worker="w1")
        finally:
            connection.close()

    worker = threading.Thread(target=step)
    worker.start()
    assert inside.wait(20)
    meanwhile()
    go.set()
    worker.join(20)
    return out["outcome"]


def test_a_cancel_before_the_approved_tool_ran_means_it_never_runs(
    approved: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    thread_id, head = approved
    olga = make_user("olga", "operator")
    tools = registry.get("refunds").nodes["tools"]

    outcome = step_held_while(
        monkeypatch,
        thread_id=thread_id,
        head=head,
        tools=tools,
        meanwhile=lambda: do_control(thread_id, user=olga, verb="cancel"),
    )

    assert outcome.kind == "stale"
    assert not Refund.objects.exists()  # it was issued after the cancel had committed
    assert Thread.objects.get(pk=thread_id).status == ThreadStatus.CANCELLED


def test_a_step_that_fails_after_a_cancel_leaves_the_thread_cancelled(
    approved: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    thread_id, head = approved
    olga = make_user("olga", "operator")

    def failing(state: Any, ctx: Any) -> Any:
        raise ValueError("a tool bug")  # not retryable: the step fails the thread

    step_held_while(
        monkeypatch,
        thread_id=thread_id,
        head=head,
        tools=failing,
        meanwhile=lambda: do_control(thread_id, user=olga, verb="cancel"),
    )

    assert Thread.objects.get(pk=thread_id).status == ThreadStatus.CANCELLED
    assert not Refund.objects.exists()
