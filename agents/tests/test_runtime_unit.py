"""The tool-calling loop and step runtime, on the in-memory backend with a scripted model.

A scripted model is fine here: these are unit tests of what the runtime does with a reply.
The real HTTP path to a model is covered by the offline-model and integration tests.
"""

import datetime
import json
from collections.abc import Iterator
from functools import partial
from typing import Annotated, Any

import pytest
from django.db import OperationalError

from agents import dispatch, llm
from agents.examples.models import Refund
from agents.gates import HumanDecision
from agents.graph import Gate, Step, StepContext
from agents.prebuilt import EXPIRED_PREFIX, REJECTED_PREFIX, ToolAgent
from agents.registry import registry
from agents.runtime import RESULT_PREFIX, RETRYABLE, RetryFrom, _run_once, run_step
from agents.state import State, add_messages
from agents.tasks import MAX_RETRIES, advance_thread_task
from agents.tools import Approval, Decision, tool
from checkpoints.backends.base import NewCheckpoint
from checkpoints.backends.memory import MemoryBackend
from checkpoints.models import CheckpointSource, ThreadStatus

REFUND_QUEUE = Approval(queue="refunds", description="Refund {amount_cents} on {order_id}")

pytestmark = pytest.mark.usefixtures("memory_backend")


class Chat(State):
    messages: Annotated[list[dict[str, Any]], add_messages] = []


class Harness:
    """A ToolAgent with a free tool and a gated one that records every time it really runs."""

    def __init__(self) -> None:
        self.refunds: list[dict[str, Any]] = []

        @tool
        def lookup_order(order_id: str) -> dict[str, Any]:
            """Look up an order."""
            return {"order_id": order_id, "total_cents": 4250}

        @tool(approval=REFUND_QUEUE)
        def issue_refund(order_id: str, amount_cents: int) -> dict[str, Any]:
            """Refund an order."""
            self.refunds.append({"order_id": order_id, "amount_cents": amount_cents})
            return {"status": "issued", "amount_cents": amount_cents}

        self.agent = ToolAgent(
            name="unit-refunds", state=Chat, system_prompt="Be brief.", tools=[lookup_order, issue_refund]
        )


@pytest.fixture
def harness() -> Harness:
    return Harness()


class ScriptedModel:
    """Stands in for llm.complete: returns the given replies in order and records each request."""

    def __init__(self, *replies: llm.ModelReply) -> None:
        self.replies = list(replies)
        self.requests: list[dict[str, Any]] = []

    def __call__(self, *, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> llm.ModelReply:
        self.requests.append({"messages": messages, "tools": tools})
        return self.replies.pop(0)


def script(monkeypatch: pytest.MonkeyPatch, *replies: llm.ModelReply) -> ScriptedModel:
    model = ScriptedModel(*replies)
    monkeypatch.setattr(llm, "complete", model)
    return model


def reply(*calls: llm.ToolCall, content: str | None = None) -> llm.ModelReply:
    return llm.ModelReply(content=content, tool_calls=list(calls), model="scripted")


def refund_call(amount_cents: int = 4250, call_id: str = "call_refund") -> llm.ToolCall:
    args = json.dumps({"order_id": "ORD-1001", "amount_cents": amount_cents})
    return llm.ToolCall(id=call_id, name="issue_refund", arguments=args)


def lookup_call(call_id: str = "call_lookup") -> llm.ToolCall:
    return llm.ToolCall(id=call_id, name="lookup_order", arguments='{"order_id": "ORD-1001"}')


def state_after(*calls: llm.ToolCall) -> Chat:
    """The state the tools node sees: a user message, then an assistant message making the calls."""
    assistant = llm.assistant_message(reply(*calls), message_id="msg_assistant")
    return Chat.model_validate(
        {"messages": [{"id": "msg_user", "role": "user", "content": "Refund ORD-1001"}, assistant]}
    )


def forbid_run_once(key: str, fn: Any) -> Any:
    raise AssertionError(f"run_once({key!r}) called in a step that must not run tools")


def dict_run_once(store: dict[str, Any]) -> Any:
    """A run_once that remembers results in a dict, like the backend's recorded writes."""

    def run_once(key: str, fn: Any) -> Any:
        if key not in store:
            store[key] = fn()
        return store[key]

    return run_once


def context(
    decisions: dict[str, dict[str, Any]] | None = None, store: dict[str, Any] | None = None
) -> StepContext:
    return StepContext(
        thread_id="thread-1",
        checkpoint_id="checkpoint-1",
        decisions={key: HumanDecision.from_write(d) for key, d in (decisions or {}).items()},
        run_once=dict_run_once({} if store is None else store),
    )


def tool_results(step: Step) -> dict[str, str]:
    return {m["tool_call_id"]: m["content"] for m in step.update["messages"] if m["role"] == "tool"}


# --- The model node -----------------------------------------------------------------------


def test_model_step_with_a_gated_call_opens_a_gate_and_goes_to_tools(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    script(monkeypatch, reply(lookup_call(), refund_call(4250)))
    ctx = StepContext(thread_id="thread-1", checkpoint_id="c1", decisions={}, run_once=forbid_run_once)

    step = harness.agent.call_model(Chat(messages=[]), ctx)

    assert step.goto == "tools"
    assert step.gates == [
        Gate(
            key="call_refund",
            action="issue_refund",
            args={"order_id": "ORD-1001", "amount_cents": 4250},
            approval=REFUND_QUEUE,
            description="Refund 4250 on ORD-1001",
        )
    ]
    [message] = step.update["messages"]
    assert message["role"] == "assistant"
    assert [c["id"] for c in message["tool_calls"]] == ["call_lookup", "call_refund"]
    assert harness.refunds == []


def test_model_step_with_only_free_calls_has_no_gates(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    script(monkeypatch, reply(lookup_call()))

    step = harness.agent.call_model(Chat(), context())

    assert step.goto == "tools"
    assert step.gates == []


def test_model_step_without_tool_calls_ends_the_run(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    script(monkeypatch, reply(content="Done."))

    step = harness.agent.call_model(Chat(), context())

    assert step.goto is None
    assert step.update["messages"][0]["content"] == "Done."
    assert step.metadata["model"] == "scripted"


def test_model_is_asked_with_the_system_prompt_history_and_tool_schemas(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = script(monkeypatch, reply(content="Hi."))
    history = [{"id": "msg_user", "role": "user", "content": "Hello"}]

    harness.agent.call_model(Chat(messages=history), context())

    [request] = model.requests
    assert request["messages"] == [{"role": "system", "content": "Be brief."}, *history]
    assert [t["function"]["name"] for t in request["tools"]] == ["lookup_order", "issue_refund"]


def test_unparseable_arguments_to_a_gated_tool_open_no_gate_and_the_model_hears_why(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    bad = llm.ToolCall(id="call_bad", name="issue_refund", arguments="{oops")
    script(monkeypatch, reply(bad))

    step = harness.agent.call_model(Chat(), context())
    result = harness.agent.run_tools(state_after(bad), context())

    assert step.gates == []
    assert tool_results(result)["call_bad"].startswith(
        "Error: Invalid arguments for issue_refund: The arguments"
    )


# --- The tools node -----------------------------------------------------------------------


def test_free_tool_runs_without_a_decision(harness: Harness) -> None:
    step = harness.agent.run_tools(state_after(lookup_call()), context())

    assert json.loads(tool_results(step)["call_lookup"]) == {"order_id": "ORD-1001", "total_cents": 4250}
    assert step.goto == "model"
    assert step.resumed is False


def test_approve_runs_the_tool_once(harness: Harness) -> None:
    step = harness.agent.run_tools(
        state_after(refund_call()), context({"call_refund": {"decision": "approve"}})
    )

    assert harness.refunds == [{"order_id": "ORD-1001", "amount_cents": 4250}]
    assert json.loads(tool_results(step)["call_refund"]) == {"status": "issued", "amount_cents": 4250}
    assert step.goto == "model"
    assert step.resumed is True


def test_edit_runs_the_tool_with_the_edited_arguments(harness: Harness) -> None:
    edited = {"order_id": "ORD-1001", "amount_cents": 1000}

    harness.agent.run_tools(
        state_after(refund_call(4250)), context({"call_refund": {"decision": "edit", "args": edited}})
    )

    assert harness.refunds == [edited]


def test_edit_rewrites_the_call_in_the_assistant_message_in_place(harness: Harness) -> None:
    state = state_after(refund_call(4250))
    edited = {"order_id": "ORD-1001", "amount_cents": 1000}

    step = harness.agent.run_tools(state, context({"call_refund": {"decision": "edit", "args": edited}}))
    messages = Chat.apply(state.model_dump(mode="json"), step.update)["messages"]

    assert [(m["id"], m["role"]) for m in messages] == [
        ("msg_user", "user"),
        ("msg_assistant", "assistant"),
        (messages[2]["id"], "tool"),
    ]
    [call] = messages[1]["tool_calls"]
    assert call["edited"] is True
    assert json.loads(call["function"]["arguments"]) == edited


def test_approve_leaves_the_assistant_message_alone(harness: Harness) -> None:
    step = harness.agent.run_tools(
        state_after(refund_call()), context({"call_refund": {"decision": "approve"}})
    )

    assert [m["role"] for m in step.update["messages"]] == ["tool"]


def test_reject_does_not_run_the_tool(harness: Harness) -> None:
    decision = {"decision": "reject", "message": "Order is outside the refund window."}

    step = harness.agent.run_tools(state_after(refund_call()), context({"call_refund": decision}))

    assert harness.refunds == []
    assert tool_results(step)["call_refund"] == REJECTED_PREFIX + "Order is outside the refund window."


def test_an_expired_gate_tells_the_model_nobody_decided_not_that_a_person_rejected(
    harness: Harness,
) -> None:
    decision = {"decision": "reject", "message": "No reviewer decided within 1 hour.", "expired": True}

    step = harness.agent.run_tools(state_after(refund_call()), context({"call_refund": decision}))

    assert harness.refunds == []
    assert tool_results(step)["call_refund"] == EXPIRED_PREFIX + "No reviewer decided within 1 hour."


def test_reject_without_a_reason_says_so(harness: Harness) -> None:
    step = harness.agent.run_tools(
        state_after(refund_call()), context({"call_refund": {"decision": "reject"}})
    )

    assert tool_results(step)["call_refund"] == "Rejected by a human reviewer: no reason given"


def test_respond_puts_the_reviewer_text_as_the_result(harness: Harness) -> None:
    decision = {"decision": "respond", "message": "Offer store credit instead."}

    step = harness.agent.run_tools(state_after(refund_call()), context({"call_refund": decision}))

    assert harness.refunds == []
    assert tool_results(step)["call_refund"] == "Offer store credit instead."


def test_a_gated_call_without_a_decision_refuses_to_run(harness: Harness) -> None:
    with pytest.raises(RuntimeError, match="call_refund ran without a decision"):
        harness.agent.run_tools(state_after(refund_call()), context())

    assert harness.refunds == []


def test_a_gated_call_its_tool_refuses_opens_no_gate_and_tells_the_model_why(harness: Harness) -> None:
    bad = llm.ToolCall(id="call_bad", name="issue_refund", arguments='{"order_id": "ORD-1001"}')
    state = state_after(bad)

    assert harness.agent.pending_gates(state, "tools") == []
    step = harness.agent.run_tools(state, context())

    assert harness.refunds == []
    assert (
        tool_results(step)["call_bad"]
        == "Error: Invalid arguments for issue_refund: Amount cents is required"
    )


def test_an_unknown_tool_becomes_an_error_result(harness: Harness) -> None:
    call = llm.ToolCall(id="call_x", name="delete_everything", arguments="{}")

    step = harness.agent.run_tools(state_after(call), context())

    assert tool_results(step)["call_x"] == "Error: there is no tool named 'delete_everything'."


def test_edited_arguments_that_fail_the_schema_become_an_error_result(harness: Harness) -> None:
    decision = {"decision": "edit", "args": {"order_id": "ORD-1001", "amount_cents": "lots"}}

    step = harness.agent.run_tools(state_after(refund_call()), context({"call_refund": decision}))

    assert harness.refunds == []
    assert tool_results(step)["call_refund"].startswith(
        "Error: Invalid arguments for issue_refund: Amount cents must be a whole number"
    )


def test_a_database_error_in_a_tool_is_raised_for_a_retry_never_read_by_the_model() -> None:
    @tool
    def lookup_order(order_id: str) -> dict[str, Any]:
        """Look up an order."""
        raise OperationalError("canceling statement due to lock timeout")

    agent = ToolAgent(name="unit-locked", state=Chat, tools=[lookup_order])

    with pytest.raises(OperationalError):
        agent.run_tools(state_after(lookup_call()), context())
    assert issubclass(OperationalError, RETRYABLE)


def test_a_tool_result_json_cannot_hold_is_given_to_the_model_as_text_not_a_failed_thread() -> None:
    @tool
    def lookup_order(order_id: str) -> dict[str, Any]:
        """Look up an order."""
        return {"order_id": order_id, "shipped_at": datetime.datetime(2026, 11, 2, 9, 30)}

    agent = ToolAgent(name="unit-dates", state=Chat, tools=[lookup_order])

    step = agent.run_tools(state_after(lookup_call()), context())

    assert json.loads(tool_results(step)["call_lookup"]) == {
        "order_id": "ORD-1001",
        "shipped_at": "2026-11-02 09:30:00",
    }


def test_a_gate_holds_the_arguments_as_its_tool_reads_them(harness: Harness) -> None:
    # A number the model wrote as text: the tool reads it as the number, so reviewers and
    # policies see that number (a policy on `args.amount_cents > 50000` judges it).
    call = llm.ToolCall(
        id="call_refund", name="issue_refund", arguments='{"order_id": "ORD-1001", "amount_cents": "600000"}'
    )

    [gate] = harness.agent.pending_gates(state_after(call), "tools")

    assert gate.args == {"order_id": "ORD-1001", "amount_cents": 600000}


def test_a_rerun_with_the_same_run_once_store_does_not_run_the_tool_again(harness: Harness) -> None:
    state = state_after(lookup_call(), refund_call())
    store: dict[str, Any] = {}
    decisions = {"call_refund": {"decision": "approve"}}

    first = harness.agent.run_tools(state, context(decisions, store))
    # The worker died after the tool finished but before the step's checkpoint was written.
    again = harness.agent.run_tools(state, context(decisions, store))

    assert len(harness.refunds) == 1
    assert tool_results(again) == tool_results(first)


# --- run_once over the backend's recorded writes -----------------------------------------


def start_thread(backend: MemoryBackend, thread_id: str = "thread-1", *, next: str = "model") -> str:
    values = Chat.apply(Chat().model_dump(mode="json"), {"messages": [{"role": "user", "content": "Hi"}]})
    _, first = backend.create_thread(
        thread_id=thread_id,
        agent="unit-refunds",
        first=NewCheckpoint(values=values, source=CheckpointSource.INPUT, next=[next]),
        status=ThreadStatus.RUNNING,
    )
    return first.id


@pytest.mark.django_db
def test_a_rerun_after_a_crash_reuses_the_recorded_tool_result(
    harness: Harness, memory_backend: MemoryBackend
) -> None:
    checkpoint_id = start_thread(memory_backend)
    decisions = {"call_refund": HumanDecision(kind=Decision.APPROVE)}

    def ctx() -> StepContext:
        return StepContext(
            thread_id="thread-1",
            checkpoint_id=checkpoint_id,
            decisions=decisions,
            run_once=partial(_run_once, "thread-1", checkpoint_id),
        )

    first = harness.agent.run_tools(state_after(refund_call()), ctx())
    again = harness.agent.run_tools(state_after(refund_call()), ctx())

    assert len(harness.refunds) == 1
    assert tool_results(again) == tool_results(first)
    writes = memory_backend.get_writes(thread_id="thread-1", checkpoint_id=checkpoint_id)
    assert writes[RESULT_PREFIX + "call_refund"] == ("result", tool_results(first)["call_refund"])


@pytest.mark.django_db
def test_run_once_that_loses_the_race_rolls_back_its_side_effect(memory_backend: MemoryBackend) -> None:
    checkpoint_id = start_thread(memory_backend)

    def refund_while_another_worker_records_first() -> str:
        Refund.objects.create(refund_id="rf_mine", order_id="ORD-1", amount_cents=1, thread_id="thread-1")
        memory_backend.put_write(
            thread_id="thread-1",
            checkpoint_id=checkpoint_id,
            task_id=RESULT_PREFIX + "call_1",
            kind="result",
            value="theirs",
        )
        return "mine"

    result = _run_once("thread-1", checkpoint_id, "call_1", refund_while_another_worker_records_first)

    assert result == "theirs"
    assert not Refund.objects.filter(refund_id="rf_mine").exists()


# --- run_step on the memory backend -------------------------------------------------------


@pytest.fixture
def registered(harness: Harness) -> Iterator[Harness]:
    registry.register(harness.agent)
    yield harness
    registry.unregister(harness.agent.name)


@pytest.mark.django_db
def test_run_step_writes_the_final_reply_and_finishes_the_thread(
    registered: Harness, memory_backend: MemoryBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    script(monkeypatch, reply(content="All done."))
    head = start_thread(memory_backend)

    outcome = run_step(thread_id="thread-1", checkpoint_id=head, worker="w1")

    assert outcome.kind == "stepped"
    written = memory_backend.get(thread_id="thread-1")
    assert written.id == outcome.checkpoint_id
    assert written.parent_id == head
    assert written.next == []
    assert written.values["messages"][-1]["content"] == "All done."
    assert memory_backend.get_thread(thread_id="thread-1").status == ThreadStatus.DONE


@pytest.mark.django_db
def test_run_step_is_busy_while_another_worker_holds_the_lease(
    registered: Harness, memory_backend: MemoryBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = script(monkeypatch)
    head = start_thread(memory_backend)
    memory_backend.claim(thread_id="thread-1", owner="w2", ttl_s=60)

    outcome = run_step(thread_id="thread-1", checkpoint_id=head, worker="w1")

    assert outcome.kind == "busy"
    assert model.requests == []
    assert memory_backend.get(thread_id="thread-1").id == head


@pytest.mark.django_db
def test_a_step_whose_lease_was_taken_over_during_its_model_call_does_not_commit(
    registered: Harness, memory_backend: MemoryBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    head = start_thread(memory_backend)
    model = script(monkeypatch, reply(content="All done."))

    def lease_lapses_and_is_taken(**kwargs: Any) -> llm.ModelReply:
        # The heartbeat could not renew: the lease lapsed and a second worker claimed it.
        memory_backend.hand_off(thread_id="thread-1", owner="w1")
        assert memory_backend.claim(thread_id="thread-1", owner="w2", ttl_s=60)
        return model(**kwargs)

    monkeypatch.setattr(llm, "complete", lease_lapses_and_is_taken)

    outcome = run_step(thread_id="thread-1", checkpoint_id=head, worker="w1")

    assert outcome.kind == "stale"
    assert memory_backend.get(thread_id="thread-1").id == head  # the holder, w2, commits or nobody
    assert memory_backend.get_thread(thread_id="thread-1").status == ThreadStatus.RUNNING


@pytest.mark.django_db
def test_a_committed_step_hands_its_lease_off_so_the_next_step_claims_it_at_once(
    registered: Harness, memory_backend: MemoryBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    head = start_thread(memory_backend)
    script(monkeypatch, reply(lookup_call()))
    claimed_by_next: list[bool] = []
    release = memory_backend.release

    def next_step_arrives_before_release(*, thread_id: str, owner: str) -> None:
        claimed_by_next.append(memory_backend.claim(thread_id=thread_id, owner="w2", ttl_s=60) is not None)
        release(thread_id=thread_id, owner=owner)

    monkeypatch.setattr(memory_backend, "release", next_step_arrives_before_release)

    outcome = run_step(thread_id="thread-1", checkpoint_id=head, worker="w1")

    assert outcome.kind == "stepped"
    assert claimed_by_next == [True]  # not busy, although w1 had not released yet


@pytest.mark.django_db
def test_run_step_from_a_checkpoint_that_is_no_longer_the_head_is_stale(
    registered: Harness, memory_backend: MemoryBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = script(monkeypatch)
    head = start_thread(memory_backend)
    newer = memory_backend.put(
        thread_id="thread-1",
        parent_id=head,
        expected_head=head,
        status=ThreadStatus.RUNNING,
        checkpoint=NewCheckpoint(values={"messages": []}, source=CheckpointSource.UPDATE, next=["model"]),
    )

    outcome = run_step(thread_id="thread-1", checkpoint_id=head, worker="w1")

    assert outcome.kind == "stale"
    assert model.requests == []
    assert memory_backend.get(thread_id="thread-1").id == newer.id


@pytest.mark.django_db
def test_run_step_fails_the_thread_when_a_node_raises(
    registered: Harness, memory_backend: MemoryBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(**kwargs: Any) -> llm.ModelReply:
        raise KeyError("choices")

    monkeypatch.setattr(llm, "complete", broken)
    head = start_thread(memory_backend)

    outcome = run_step(thread_id="thread-1", checkpoint_id=head, worker="w1")

    assert outcome.kind == "failed"
    assert memory_backend.get_thread(thread_id="thread-1").status == ThreadStatus.FAILED
    assert memory_backend.get(thread_id="thread-1").id == head


# --- chained steps: a task runs its thread's next steps itself ----------------------------


@pytest.fixture
def enqueued(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The checkpoint ids of the steps sent to the broker."""
    sent: list[str] = []
    monkeypatch.setattr(
        dispatch,
        "enqueue_step",
        lambda *, thread_id, checkpoint_id, by_person=False: sent.append(checkpoint_id),
    )
    return sent


@pytest.mark.django_db
def test_a_chain_runs_the_thread_on_to_its_end_under_one_lease_and_sends_no_task(
    registered: Harness,
    memory_backend: MemoryBackend,
    monkeypatch: pytest.MonkeyPatch,
    enqueued: list[str],
    django_capture_on_commit_callbacks: Any,
) -> None:
    head = start_thread(memory_backend)
    model = script(monkeypatch, reply(lookup_call()), reply(content="Shipped."))
    claims_by_others: list[bool] = []

    def another_worker_tries_to_claim(**kwargs: Any) -> llm.ModelReply:
        claims_by_others.append(memory_backend.claim(thread_id="thread-1", owner="w2", ttl_s=60) is not None)
        return model(**kwargs)

    monkeypatch.setattr(llm, "complete", another_worker_tries_to_claim)

    with django_capture_on_commit_callbacks(execute=True):
        outcome = run_step(thread_id="thread-1", checkpoint_id=head, worker="w1", chain_s=60)

    assert (outcome.kind, outcome.status) == ("stepped", ThreadStatus.DONE)
    assert claims_by_others == [False, False]  # the lease is held between the chain's steps
    history = [c.node for c in memory_backend.list(thread_id="thread-1")]
    assert history == ["model", "tools", "model", ""]  # every step still has its checkpoint
    assert enqueued == []
    assert memory_backend.claim(thread_id="thread-1", owner="w2", ttl_s=60) is not None  # released


@pytest.mark.django_db
def test_without_chain_time_one_step_runs_and_the_next_is_sent(
    registered: Harness,
    memory_backend: MemoryBackend,
    monkeypatch: pytest.MonkeyPatch,
    enqueued: list[str],
    django_capture_on_commit_callbacks: Any,
) -> None:
    head = start_thread(memory_backend)
    model = script(monkeypatch, reply(lookup_call()), reply(refund_call()))

    with django_capture_on_commit_callbacks(execute=True):
        outcome = run_step(thread_id="thread-1", checkpoint_id=head, worker="w1", chain_s=0)

    assert len(model.requests) == 1
    assert enqueued == [outcome.checkpoint_id]


@pytest.mark.django_db
def test_a_pause_during_a_chain_stops_it_after_the_step_in_flight(
    registered: Harness, memory_backend: MemoryBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    head = start_thread(memory_backend)
    model = script(monkeypatch, reply(lookup_call()), reply(refund_call()))

    def operator_pauses(**kwargs: Any) -> llm.ModelReply:
        memory_backend.set_status(thread_id="thread-1", status=ThreadStatus.PAUSED)
        return model(**kwargs)

    monkeypatch.setattr(llm, "complete", operator_pauses)

    outcome = run_step(thread_id="thread-1", checkpoint_id=head, worker="w1", chain_s=60)

    assert (outcome.kind, outcome.status) == ("stepped", ThreadStatus.PAUSED)
    assert len(model.requests) == 1
    assert memory_backend.get(thread_id="thread-1").node == "model"


def unavailable_on_the_second_call(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Script a lookup, then "Shipped."; the second call to the model fails once (503) first.
    Returns the calls made, failed ones included."""
    model = script(monkeypatch, reply(lookup_call()), reply(content="Shipped."))
    calls: list[int] = []

    def complete(**kwargs: Any) -> llm.ModelReply:
        calls.append(1)
        if len(calls) == 2:
            raise llm.ModelUnavailable("503")
        return model(**kwargs)

    monkeypatch.setattr(llm, "complete", complete)
    return calls


@pytest.mark.django_db
def test_a_retryable_error_later_in_a_chain_is_retried_from_the_head_it_reached(
    registered: Harness, memory_backend: MemoryBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    head = start_thread(memory_backend)
    unavailable_on_the_second_call(monkeypatch)

    with pytest.raises(RetryFrom) as raised:
        run_step(thread_id="thread-1", checkpoint_id=head, worker="w1", chain_s=60)

    reached = memory_backend.get(thread_id="thread-1")
    assert (raised.value.checkpoint_id, reached.node) == (reached.id, "tools")
    assert isinstance(raised.value.error, llm.ModelUnavailable)


@pytest.mark.django_db
def test_the_step_task_retries_a_later_step_of_its_chain_from_the_head_it_reached(
    registered: Harness, memory_backend: MemoryBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    head = start_thread(memory_backend)
    calls = unavailable_on_the_second_call(monkeypatch)

    result = advance_thread_task.apply(args=("thread-1", head)).get()  # retries run eagerly

    assert result == "stepped"
    assert len(calls) == 3
    assert memory_backend.get_thread(thread_id="thread-1").status == ThreadStatus.DONE
    assert [c.node for c in memory_backend.list(thread_id="thread-1")] == ["model", "tools", "model", ""]


@pytest.mark.django_db
def test_a_model_that_stays_down_fails_the_thread_after_max_retries_with_the_reason(
    registered: Harness, memory_backend: MemoryBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []

    def down(**kwargs: Any) -> llm.ModelReply:
        calls.append(1)
        raise llm.ModelUnavailable("model unavailable: 503")

    monkeypatch.setattr(llm, "complete", down)
    head = start_thread(memory_backend)

    result = advance_thread_task.apply(args=("thread-1", head)).get()  # retries run eagerly

    thread = memory_backend.get_thread(thread_id="thread-1")
    assert (result, thread.status, thread.error) == ("failed", ThreadStatus.FAILED, "model unavailable: 503")
    assert len(calls) == MAX_RETRIES + 1  # the first attempt and every retry, then no more
    assert thread.head_id == head
