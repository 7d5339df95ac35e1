"""The runtime on the real checkpoint store: a crash mid-step repeats no side effect, old
checkpoints are upgraded on load, and tools reach their tenant's cross-thread store."""

import json
from collections.abc import Iterator
from typing import Annotated, Any

import pytest

from agents import signals
from agents.examples.agents import issue_refund
from agents.examples.models import Refund
from agents.graph import Agent, Gate, Step, StepContext
from agents.registry import registry
from agents.runtime import RESULT_PREFIX, load_state, run_step
from agents.state import State, add_messages
from agents.tools import Approval, ToolContext
from approvals.models import ApprovalRequest
from checkpoints.backends import get_backend
from checkpoints.backends.base import NewCheckpoint
from checkpoints.models import Checkpoint, CheckpointSource, StoredValue, ThreadStatus
from checkpoints.store import store_for

THREAD = "crash-1"


class WorkerDied(BaseException):
    """The worker process dies here: nothing after it runs, no handler sees it."""


class Chat(State):
    messages: Annotated[list[dict[str, Any]], add_messages] = []


class RefundOnce:
    """An agent whose one step refunds through a tool, and can die right after recording it."""

    def __init__(self) -> None:
        self.die_after_recording = True
        self.agent = Agent(name="crash-refunds", state=Chat, nodes={"refund": self.refund}, start="refund")

    def refund(self, state: Chat, ctx: StepContext) -> Step:
        tool_ctx = ToolContext(
            thread_id=ctx.thread_id, checkpoint_id=ctx.checkpoint_id, tool_call_id="call_1"
        )
        args = {"order_id": "ORD-1001", "amount_cents": 500}
        result = ctx.run_once("call_1", lambda: issue_refund.invoke(args, context=tool_ctx))
        if self.die_after_recording:
            self.die_after_recording = False
            raise WorkerDied
        message = {"role": "tool", "tool_call_id": "call_1", "content": json.dumps(result)}
        return Step(update={"messages": [message]}, goto=None)


@pytest.fixture
def refund_once() -> Iterator[RefundOnce]:
    harness = RefundOnce()
    registry.register(harness.agent)
    yield harness
    registry.unregister(harness.agent.name)


def start(agent: Agent, values: dict[str, Any], *, schema_version: int = 1, metadata: Any = None) -> str:
    _, first = get_backend().create_thread(
        thread_id=THREAD,
        agent=agent.name,
        first=NewCheckpoint(
            values=values, source=CheckpointSource.INPUT, next=[agent.start], schema_version=schema_version
        ),
        status=ThreadStatus.RUNNING,
        metadata=metadata,
    )
    return first.id


@pytest.mark.django_db
def test_a_step_that_dies_after_recording_a_tool_result_reuses_it_when_it_runs_again(
    refund_once: RefundOnce,
) -> None:
    head = start(refund_once.agent, {"messages": [{"role": "user", "content": "Refund ORD-1001"}]})

    with pytest.raises(WorkerDied):
        run_step(thread_id=THREAD, checkpoint_id=head, worker="w1")

    assert Refund.objects.count() == 1
    assert get_backend().get_thread(thread_id=THREAD).head_id == head  # the step's checkpoint never landed
    recorded = get_backend().get_writes(thread_id=THREAD, checkpoint_id=head)[RESULT_PREFIX + "call_1"]

    outcome = run_step(thread_id=THREAD, checkpoint_id=head, worker="w2")

    assert outcome.kind == "stepped"
    assert Refund.objects.count() == 1  # the side effect table shows one row
    reply = get_backend().get(thread_id=THREAD).values["messages"][-1]
    assert json.loads(reply["content"]) == recorded[1]
    assert Refund.objects.get().idempotency_key == f"{THREAD}:{head}:call_1"


@pytest.mark.django_db
@pytest.mark.parametrize("damage", ["fails its digest check", "misses a stored row"])
def test_a_head_that_cannot_be_loaded_fails_the_thread_with_the_reason(
    refund_once: RefundOnce, damage: str
) -> None:
    head = start(refund_once.agent, {"messages": [{"role": "user", "content": "Refund ORD-1001"}]})
    if damage == "fails its digest check":
        Checkpoint.objects.filter(pk=head).update(refs={"tampered": ["i", True]})
    else:
        StoredValue.objects.filter(thread_id=THREAD).delete()

    outcome = run_step(thread_id=THREAD, checkpoint_id=head, worker="w1")

    # Failed, not left running: the reconciler would re-send a step that cannot load forever.
    thread = get_backend().get_thread(thread_id=THREAD)
    assert (outcome.kind, thread.status) == ("failed", ThreadStatus.FAILED)
    assert head in thread.error
    assert Refund.objects.count() == 0


@pytest.mark.django_db
def test_a_thread_whose_agent_is_no_longer_registered_fails_with_the_reason() -> None:
    retired = Agent(name="retired", state=Chat, nodes={"model": visit}, start="model")
    head = start(retired, {"messages": [{"role": "user", "content": "Hello"}]})

    outcome = run_step(thread_id=THREAD, checkpoint_id=head, worker="w1")

    thread = get_backend().get_thread(thread_id=THREAD)
    assert (outcome.kind, thread.status) == ("failed", ThreadStatus.FAILED)
    assert thread.error.startswith("UnknownAgent: Unknown agent 'retired'")


class ReceiverBroke(Exception):
    pass


@pytest.mark.django_db
def test_a_gate_receiver_that_raises_fails_the_thread_and_opens_no_gate() -> None:
    def ask(state: Chat, ctx: StepContext) -> Step:
        gate = Gate(key="call_1", action="issue_refund", args={"order_id": "ORD-1001"}, approval=Approval())
        return Step(update={}, goto="ask", gates=[gate])

    def broken_receiver(**kwargs: Any) -> None:
        raise ReceiverBroke("the policy engine is down")

    agent = Agent(name="asks", state=Chat, nodes={"ask": ask}, start="ask")
    registry.register(agent)
    signals.gates_opened.connect(broken_receiver, dispatch_uid="test.broken")
    try:
        head = start(agent, {"messages": [{"role": "user", "content": "Refund ORD-1001"}]})
        outcome = run_step(thread_id=THREAD, checkpoint_id=head, worker="w1")
    finally:
        signals.gates_opened.disconnect(dispatch_uid="test.broken")
        registry.unregister(agent.name)

    thread = get_backend().get_thread(thread_id=THREAD)
    assert (outcome.kind, thread.status, thread.head_id) == ("failed", ThreadStatus.FAILED, head)
    assert thread.error == "ReceiverBroke: the policy engine is down"
    assert not ApprovalRequest.objects.exists()  # rolled back with the step's checkpoint


class ProfileV2(State):
    """Version 1 stored {"username": ...}; version 2 renamed it and counts visits."""

    schema_version = 2
    upgrades = {1: lambda v: {"name": v["username"], "visits": 0}}
    name: str = ""
    visits: int = 0


def visit(state: ProfileV2, ctx: StepContext) -> Step:
    return Step(update={"visits": state.visits + 1}, goto=None)


@pytest.fixture
def profiles() -> Iterator[Agent]:
    agent = Agent(name="profiles", state=ProfileV2, nodes={"visit": visit}, start="visit")
    registry.register(agent)
    yield agent
    registry.unregister(agent.name)


@pytest.mark.django_db
def test_a_checkpoint_stored_at_an_older_schema_version_is_upgraded_on_load(profiles: Agent) -> None:
    head = start(profiles, {"username": "ada"}, schema_version=1)

    state = load_state(profiles, get_backend().get(thread_id=THREAD, checkpoint_id=head))

    assert state == ProfileV2(name="ada", visits=0)


@pytest.mark.django_db
def test_a_thread_stored_at_an_older_schema_version_steps_on_at_the_new_one(profiles: Agent) -> None:
    head = start(profiles, {"username": "ada"}, schema_version=1)

    run_step(thread_id=THREAD, checkpoint_id=head, worker="w1")

    written = get_backend().get(thread_id=THREAD)
    assert (written.values, written.schema_version) == ({"name": "ada", "visits": 1}, 2)


@pytest.mark.django_db
def test_a_tool_reaches_the_store_of_its_threads_tenant(refund_once: RefundOnce) -> None:
    head = start(refund_once.agent, {"messages": []}, metadata={"tenant": "org:acme"})
    ctx = ToolContext(thread_id=THREAD, checkpoint_id=head, tool_call_id="call_1")

    ctx.store.put(("customers", "ORD-1001"), "refunded", {"cents": 500})

    assert store_for(tenant="org:acme").get(("customers", "ORD-1001"), "refunded").value == {"cents": 500}  # type: ignore[union-attr]
    assert store_for(tenant="agent:crash-refunds").search() == []
